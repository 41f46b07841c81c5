package ubus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

// A server registers an object; a client calls it by path and prints the
// reply as `ubus call` would.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "ubus.sock")
	broker, err := ubustest.Listen(sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv, err := ubus.Dial(ctx, sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	obj := &ubus.Object{Path: "hello", Methods: []ubus.Method{{
		Name: "greet",
		Args: []ubus.ArgSig{{Name: "name", Type: ubus.TypeString}},
		Handler: func(_ context.Context, req *ubus.Request) ([]ubus.Attr, error) {
			name, ok := ubus.Find(req.Args, "name")
			if !ok || name.Type != ubus.TypeString {
				return nil, ubus.StatusInvalidArgument
			}
			return []ubus.Attr{ubus.String("greeting", "hello "+name.Str), ubus.Int32("length", int32(len(name.Str)))}, nil
		},
	}}}
	if err := srv.AddObject(ctx, obj); err != nil {
		fmt.Println(err)
		return
	}

	cli, err := ubus.Dial(ctx, sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	args, _ := ubus.AttrsFromJSON([]byte(`{"name": "router"}`))
	reply, err := cli.Call(ctx, "hello", "greet", args)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := ubus.AttrsToJSON(reply, "\t")
	fmt.Println(string(out))
	_, err = cli.Call(ctx, "hello", "greet", nil)
	fmt.Println(err)
	// Output:
	// {
	// 	"greeting": "hello router",
	// 	"length": 6
	// }
	// ubus: invoke greet: Invalid argument
}
