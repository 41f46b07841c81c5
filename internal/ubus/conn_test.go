package ubus_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

func dial(t testing.TB, path string) *ubus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ubus.Dial(ctx, path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// demoObject is a small object with one method per kind of reply.
func demoObject(path string) *ubus.Object {
	return &ubus.Object{Path: path, Methods: []ubus.Method{
		{Name: "echo", Args: []ubus.ArgSig{{"mode", ubus.TypeString}, {"n", ubus.TypeInt32}},
			Handler: func(_ context.Context, r *ubus.Request) ([]ubus.Attr, error) {
				return append([]ubus.Attr{}, r.Args...), nil
			}},
		{Name: "whoami", Handler: func(_ context.Context, r *ubus.Request) ([]ubus.Attr, error) {
			return []ubus.Attr{ubus.String("user", r.User), ubus.String("group", r.Group),
				ubus.Int64("peer", int64(r.Peer))}, nil
		}},
		{Name: "fail", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			return nil, fmt.Errorf("bad input: %w", ubus.StatusInvalidArgument)
		}},
		{Name: "oops", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			return nil, errors.New("plain error")
		}},
		{Name: "panic", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			panic("handler bug")
		}},
		{Name: "empty", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			return nil, nil
		}},
		{Name: "slow", Handler: func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
			select {
			case <-time.After(3 * time.Second):
			case <-ctx.Done():
			}
			return nil, nil
		}},
	}}
}

// slowObject is demoObject whose slow method first signals on the returned
// channel, so a test knows a call is in progress on the server instead of
// sleeping and hoping it is.
func slowObject(path string) (*ubus.Object, <-chan struct{}) {
	obj := demoObject(path)
	entered := make(chan struct{}, 8)
	for i := range obj.Methods {
		if m := &obj.Methods[i]; m.Name == "slow" {
			h := m.Handler
			m.Handler = func(ctx context.Context, r *ubus.Request) ([]ubus.Attr, error) {
				entered <- struct{}{}
				return h(ctx, r)
			}
		}
	}
	return obj, entered
}

// waitSignal waits for one value on c, failing t after d.
func waitSignal(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("no signal within %v: %s", d, what)
	}
}

func TestCallThroughBroker(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	obj := demoObject("test.demo")
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if obj.ID() == 0 || obj.TypeID() == 0 {
		t.Fatalf("ids not set: %d %d", obj.ID(), obj.TypeID())
	}
	args := []ubus.Attr{ubus.String("mode", "auto"), ubus.Int32("n", 7), ubus.Table("t", ubus.Bool("b", true)),
		ubus.Array("a", ubus.Int64("", 1<<40), ubus.Double("", 0.5))}
	tests := []struct {
		method  string
		args    []ubus.Attr
		want    []ubus.Attr
		wantErr error
	}{
		{"echo", args, args, nil},
		{"fail", nil, nil, ubus.StatusInvalidArgument},
		{"oops", nil, nil, ubus.StatusUnknownError},
		{"panic", nil, nil, ubus.StatusUnknownError},
		{"empty", nil, nil, nil},
		{"nosuch", nil, nil, ubus.StatusMethodNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			got, err := cli.Call(ctx, "test.demo", tc.method, tc.args)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := cli.Call(ctx, "no.such", "x", nil); !errors.Is(err, ubus.StatusNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	if _, err := cli.Invoke(ctx, 0x12345678, "x", nil); !errors.Is(err, ubus.StatusNotFound) {
		t.Fatalf("missing object id: %v", err)
	}
	who, err := cli.Call(ctx, "test.demo", "whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := ubus.AttrsValue(who); v["peer"] != int64(cli.ID()) || v["user"] == "" {
		t.Fatalf("whoami = %v (client id %08x)", v, cli.ID())
	}
}

func TestLookup(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	for _, p := range []string{"b.two", "a.one", "b.one", "c"} {
		if err := srv.AddObject(ctx, demoObject(p)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pattern string
		want    []string
		err     error
	}{
		{"", []string{"a.one", "b.one", "b.two", "c"}, nil},
		{"b.*", []string{"b.one", "b.two"}, nil},
		{"*", []string{"a.one", "b.one", "b.two", "c"}, nil},
		{"c", []string{"c"}, nil},
		{"d.*", nil, ubus.StatusNotFound},
		{"d", nil, ubus.StatusNotFound},
	}
	for _, tc := range tests {
		infos, err := cli.Lookup(ctx, tc.pattern)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Fatalf("lookup %q: err %v, want %v", tc.pattern, err, tc.err)
		}
		var got []string
		for _, i := range infos {
			got = append(got, i.Path)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("lookup %q = %v, want %v", tc.pattern, got, tc.want)
		}
	}
	infos, err := cli.Lookup(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := []ubus.MethodSig{{"echo", []ubus.ArgSig{{"mode", ubus.TypeString}, {"n", ubus.TypeInt32}}}}
	if got := infos[0].Signature[:1]; !reflect.DeepEqual(got, want) {
		t.Errorf("signature = %+v, want %+v", got, want)
	}
	if len(infos[0].Signature) != len(demoObject("x").Methods) {
		t.Errorf("signature has %d methods", len(infos[0].Signature))
	}
}

func TestAddRemoveObject(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, other := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	obj := demoObject("x.y")
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddObject(ctx, obj); err == nil {
		t.Fatal("registering twice succeeded")
	}
	if err := other.AddObject(ctx, demoObject("x.y")); !errors.Is(err, ubus.StatusInvalidArgument) {
		t.Fatalf("duplicate path: %v", err)
	}
	if err := other.RemoveObject(ctx, obj); err == nil {
		t.Fatal("removing from a foreign connection succeeded")
	}
	if err := srv.RemoveObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Lookup(ctx, "x.y"); !errors.Is(err, ubus.StatusNotFound) {
		t.Fatalf("after remove: %v", err)
	}
	if err := other.AddObject(ctx, obj); err != nil {
		t.Fatalf("re-register elsewhere: %v", err)
	}
}

func TestEvents(t *testing.T) {
	_, sock := ubustest.Start(t)
	a, b := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	type ev struct {
		name string
		data any
	}
	var mu sync.Mutex
	got := map[string][]ev{}
	rec := func(key string) func(string, []ubus.Attr) {
		return func(name string, data []ubus.Attr) {
			mu.Lock()
			got[key] = append(got[key], ev{name, ubus.AttrsValue(data)})
			mu.Unlock()
		}
	}
	stopExact, err := a.Listen(ctx, "steering.test", rec("exact"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Listen(ctx, "steering.*", rec("prefix")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Listen(ctx, "*", rec("all")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Listen(ctx, "steering.test", rec("self")); err != nil {
		t.Fatal(err)
	}
	send := func(name string, n int32) {
		if err := b.Send(ctx, name, []ubus.Attr{ubus.Int32("n", n)}); err != nil {
			t.Fatal(err)
		}
	}
	send("steering.test", 1)
	send("steering.other", 2)
	send("other", 3)
	// Events in flight when a listener stops are dropped: stop only after
	// the exact listener has its event.
	if !waitFor(3*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got["exact"]) == 1 }) {
		t.Fatal("exact listener got no event")
	}
	if err := stopExact(); err != nil {
		t.Fatal(err)
	}
	send("steering.test", 4)
	if err := b.Send(ctx, "ubus.fake", nil); !errors.Is(err, ubus.StatusPermissionDenied) {
		t.Fatalf("ubus.* event: %v", err)
	}
	want := map[string][]ev{
		"exact":  {{"steering.test", map[string]any{"n": int64(1)}}},
		"prefix": {{"steering.test", map[string]any{"n": int64(1)}}, {"steering.other", map[string]any{"n": int64(2)}}, {"steering.test", map[string]any{"n": int64(4)}}},
		"all":    {{"steering.test", map[string]any{"n": int64(1)}}, {"steering.other", map[string]any{"n": int64(2)}}, {"other", map[string]any{"n": int64(3)}}, {"steering.test", map[string]any{"n": int64(4)}}},
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		ok := reflect.DeepEqual(got, want)
		snapshot := fmt.Sprint(got)
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events = %s\nwant %v", snapshot, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSubscribeNotify(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	active := make(chan bool, 4)
	obj := demoObject("notifier")
	obj.OnSubscribe = func(a bool) { active <- a }
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	stop, err := cli.Subscribe(ctx, "notifier", func(typ string, data []ubus.Attr) {
		got <- typ + "=" + fmt.Sprint(ubus.AttrsValue(data)["v"])
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := <-active; !a || !obj.HasSubscribers() {
		t.Fatal("no active subscription notice")
	}
	for i := range 2 {
		if err := srv.Notify(ctx, obj, "tick", []ubus.Attr{ubus.Int32("v", int32(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		select {
		case s := <-got:
			if want := fmt.Sprintf("tick=%d", i); s != want {
				t.Fatalf("notification %q, want %q", s, want)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("notification lost")
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-active:
		if a {
			t.Fatal("still active after unsubscribe")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no inactive notice")
	}
	if _, err := cli.Subscribe(ctx, "nobody", func(string, []ubus.Attr) {}); !errors.Is(err, ubus.StatusNotFound) {
		t.Fatalf("subscribe to missing object: %v", err)
	}
}

func TestDeadPeerAnswersPendingCalls(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	obj, entered := slowObject("dying")
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctx, "dying", "slow", nil)
		errc <- err
	}()
	waitSignal(t, entered, 2*time.Second, "the call never reached the server")
	srv.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ubus.StatusNotFound) {
			t.Fatalf("pending call: %v, want NOT_FOUND", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("pending call hangs after its server died")
	}
}

func TestContextDeadline(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	if err := srv.AddObject(ctx, demoObject("slowpoke")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cli.Call(short, "slowpoke", "slow", nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	// The connection stays usable.
	if _, err := cli.Call(ctx, "slowpoke", "empty", nil); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv := dial(t, sock)
	ctx := testCtx(t)
	if err := srv.AddObject(ctx, demoObject("conc")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		cli := dial(t, sock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := int32(c*1000 + i)
				got, err := cli.Call(ctx, "conc", "echo", []ubus.Attr{ubus.Int32("n", n)})
				if err != nil || len(got) != 1 || got[0].Int != int64(n) {
					errs <- fmt.Errorf("client %d call %d: %v %+v", c, i, err, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosedConnFailsFast(t *testing.T) {
	b, sock := ubustest.Start(t)
	cli := dial(t, sock)
	b.Close()
	select {
	case <-cli.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after broker shutdown")
	}
	if _, err := cli.Lookup(testCtx(t), ""); !errors.Is(err, ubus.ErrClosed) {
		t.Fatalf("lookup on a dead connection: %v", err)
	}
}

// TestInvokesServedConcurrently: two calls meet inside the handler, which
// only works if the second is served while the first is still running.
func TestInvokesServedConcurrently(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv := dial(t, sock)
	ctx := testCtx(t)
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	obj := &ubus.Object{Path: "barrier", Methods: []ubus.Method{{Name: "wait",
		Handler: func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
			arrived <- struct{}{}
			select {
			case <-release:
				return []ubus.Attr{ubus.Bool("ok", true)}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}}}
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cli := dial(t, sock)
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := cli.Call(ctx, "barrier", "wait", nil)
			errc <- err
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(3 * time.Second):
			t.Fatal("the second call was not served while the first ran")
		}
	}
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestLargeReplies: a reply near the limit passes the broker intact; one
// that cannot be framed is answered with UNKNOWN_ERROR, not left hanging.
func TestLargeReplies(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv, cli := dial(t, sock), dial(t, sock)
	ctx := testCtx(t)
	sizes := map[string]int{"half": 512 << 10, "edge": ubus.MaxMessageLen - 20}
	obj := &ubus.Object{Path: "big", Methods: []ubus.Method{{Name: "get",
		Handler: func(_ context.Context, r *ubus.Request) ([]ubus.Attr, error) {
			which, _ := ubus.Find(r.Args, "size")
			return []ubus.Attr{ubus.String("s", string(make([]byte, sizes[which.Str])))}, nil
		}}}}
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	got, err := cli.Call(ctx, "big", "get", []ubus.Attr{ubus.String("size", "half")})
	if err != nil || len(got) != 1 || len(got[0].Str) != 512<<10 {
		t.Fatalf("half MiB reply: %v (%d attrs)", err, len(got))
	}
	if _, err := cli.Call(ctx, "big", "get", []ubus.Attr{ubus.String("size", "edge")}); !errors.Is(err, ubus.StatusUnknownError) {
		t.Fatalf("oversized reply: %v", err)
	}
}
