package platform

import "testing"

func TestParseTaskStat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    TaskStat
		wantErr bool
	}{
		{"300 (napi/eth0-257) S 2 0 0 0 -1 2129984 0 0", TaskStat{PID: 300, Comm: "napi/eth0-257", Kernel: true}, false},
		{"12 (a) b) (c) S 1 1 1 0 -1 4194560 0", TaskStat{PID: 12, Comm: "a) b) (c", Kernel: false}, false},
		{"77 (napi/eth0-1) S 1 1 1 0 -1 4194560 0 0", TaskStat{PID: 77, Comm: "napi/eth0-1", Kernel: false}, false},
		{"1 (init) S 0 1 1 0 -1", TaskStat{}, true},
		{"garbage", TaskStat{}, true},
		{"5 (x) S 1 1 1 0 -1 notanumber", TaskStat{}, true},
		{"x (y) S 1 1 1 0 -1 0", TaskStat{}, true},
	} {
		got, err := ParseTaskStat([]byte(tc.in))
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("ParseTaskStat(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
