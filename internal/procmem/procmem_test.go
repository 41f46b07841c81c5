package procmem

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Status
		err  bool
	}{
		{name: "daemon", in: "Name:\tpacket-steering\nState:\tS (sleeping)\nVmHWM:\t    7536 kB\nVmRSS:\t    6584 kB\nRssAnon:\t    2940 kB\nRssFile:\t    3644 kB\nRssShmem:\t       0 kB\nThreads:\t7\nCpus_allowed_list:\t0-1\n",
			want: Status{RSS: 6584, HWM: 7536, Anon: 2940, File: 3644, Threads: 7}},
		{name: "initramfs binary", in: "VmRSS:\t5660 kB\nRssAnon:\t1780 kB\nRssFile:\t4 kB\nRssShmem:\t3876 kB\n",
			want: Status{RSS: 5660, Anon: 1780, File: 4, Shmem: 3876}},
		{name: "kernel thread", in: "Name:\tkthreadd\nThreads:\t1\n", want: Status{Threads: 1}, err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(bufio.NewScanner(strings.NewReader(tt.in)))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS <= 0 || st.Anon <= 0 || st.Threads < 1 || st.HWM < st.RSS {
		t.Errorf("own status %+v", st)
	}
	if _, err := Read(-1); err == nil {
		t.Error("pid -1 read")
	}
}
