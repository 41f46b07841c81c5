package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// DefaultSID is the session id of an unauthenticated caller, as uhttpd and
// LuCI's rpc.js use it ("00000000000000000000000000000000").
const DefaultSID = "00000000000000000000000000000000"

// maxPostSize is uhttpd's UH_UBUS_MAX_POST_SIZE: larger bodies are a parse error.
const maxPostSize = 65536

// Bus is the ubus side of the /ubus endpoint, in JSON terms, so that the
// HTTP handler does not depend on how messages travel.
type Bus interface {
	// Call invokes method on object with args (a JSON object) and returns
	// the ubus status code and the reply data as a JSON object, or nil when
	// the method sent no data. A non-nil error means the call did not
	// complete (connection lost, timeout), not that the method failed.
	Call(ctx context.Context, object, method string, args json.RawMessage) (status int, reply json.RawMessage, err error)
	// Lookup lists the objects whose path matches pattern ("" or "*" for
	// all, a trailing "*" as a prefix match), as `ubus list` does.
	Lookup(ctx context.Context, pattern string) ([]Object, error)
}

// Object is one ubus object as Lookup returns it.
type Object struct {
	Path string
	// Methods is the signature in registration order; nil when the object
	// sent none.
	Methods []Method
}

// Method is one method of an object's signature.
type Method struct {
	Name string
	Args []Arg
}

// Arg is one argument of a method signature: its name and blobmsg type
// (1 array, 2 table, 3 string, 4 int64, 5 int32, 6 int16, 7 int8/bool, 8 double).
type Arg struct {
	Name string
	Type int
}

// JSON-RPC error codes and messages, exactly as uhttpd's ubus.c has them.
type rpcError int

const (
	errParse rpcError = iota
	errRequest
	errMethod
	errParams
	errInternal
	errObject
	errSession
	errAccess
	errTimeout
)

var rpcErrors = map[rpcError]struct {
	code int
	msg  string
}{
	errParse:    {-32700, "Parse error"},
	errRequest:  {-32600, "Invalid request"},
	errMethod:   {-32601, "Method not found"},
	errParams:   {-32602, "Invalid parameters"},
	errInternal: {-32603, "Internal error"},
	errObject:   {-32000, "Object not found"},
	errSession:  {-32001, "Session not found"},
	errAccess:   {-32002, "Access denied"},
	errTimeout:  {-32003, "ubus request timed out"},
}

// Sessions maps session ids to sessions. It is safe for concurrent use.
type Sessions struct {
	mu    sync.RWMutex
	m     map[string]Session
	order []string // ids made by Login, oldest first
}

// NewSessions returns an empty session table.
func NewSessions() *Sessions { return &Sessions{m: map[string]Session{}} }

// Put adds or replaces a session.
func (s *Sessions) Put(sid string, sess Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[sid] = sess
}

// Get returns the session for sid.
func (s *Sessions) Get(sid string) (Session, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sess, ok := s.m[sid]
	return sess, ok
}

// RPCHandler serves uhttpd-mod-ubus's JSON-RPC 2.0 protocol on one URL
// (POST of one request object or of an array of them), bridged to a Bus.
// Access is decided per call by the session's ACL grants, as uhttpd asks
// rpcd's session object.
type RPCHandler struct {
	Bus      Bus
	ACL      ACL
	Sessions *Sessions
	// Users are the logins session login accepts.
	Users map[string]User
}

type rpcRequest struct {
	JSONRPC *string         `json:"jsonrpc"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`
}

// ServeHTTP implements http.Handler.
func (h *RPCHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodOptions:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	case http.MethodPost:
	case http.MethodGet:
		h.serveGet(r.Context(), w, r.URL.Path)
		return
	default:
		http.Error(w, "Invalid Request", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPostSize+1))
	w.Header().Set("Content-Type", "application/json")
	if err != nil || len(body) > maxPostSize {
		w.Header().Set("Connection", "close")
		writeJSON(w, errorReply(nil, errParse))
		return
	}
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			writeJSON(w, errorReply(nil, errParse))
			return
		}
		out := make([]any, 0, len(batch))
		for _, item := range batch {
			out = append(out, h.handleOne(r.Context(), item))
		}
		writeJSON(w, out)
	case len(trimmed) > 0 && trimmed[0] == '{':
		writeJSON(w, h.handleOne(r.Context(), trimmed))
	default:
		writeJSON(w, errorReply(nil, errParse))
	}
}

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorReply(nil, errInternal))
	}
	_, _ = w.Write(b)
}

// reply is one JSON-RPC response. Result and Error are RawMessage so that
// the order of the ubus reply's fields is kept.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *replyError     `json:"error,omitempty"`
}

type replyError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

func errorReply(id json.RawMessage, e rpcError) reply {
	re := rpcErrors[e]
	return reply{JSONRPC: "2.0", ID: idOrNull(id), Error: &replyError{Code: re.code, Message: re.msg}}
}

func (h *RPCHandler) handleOne(ctx context.Context, raw json.RawMessage) reply {
	var req rpcRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		// Not an object: uhttpd answers a parse error without an id.
		return errorReply(nil, errParse)
	}
	if req.JSONRPC == nil || *req.JSONRPC != "2.0" || req.Method == nil {
		return errorReply(req.ID, errParse)
	}
	switch *req.Method {
	case "call":
		return h.call(ctx, req)
	case "list":
		return h.list(ctx, req)
	default:
		return errorReply(req.ID, errMethod)
	}
}

// call handles {"method":"call","params":[sid, object, method, args]}.
func (h *RPCHandler) call(ctx context.Context, req rpcRequest) reply {
	var params []json.RawMessage
	if err := json.Unmarshal(req.Params, &params); err != nil || len(params) < 4 {
		return errorReply(req.ID, errParse)
	}
	var sid, object, method string
	for i, dst := range []*string{&sid, &object, &method} {
		if err := json.Unmarshal(params[i], dst); err != nil {
			return errorReply(req.ID, errParse)
		}
	}
	args := bytes.TrimSpace(params[3])
	var fields map[string]json.RawMessage
	if len(args) == 0 || args[0] != '{' || json.Unmarshal(args, &fields) != nil {
		return errorReply(req.ID, errParse)
	}
	if isRPCDObject(object) {
		if _, ok := fields["ubus_rpc_session"]; ok {
			return errorReply(req.ID, errParams)
		}
		return h.callRPCD(req, sid, object, method, fields)
	}
	objs, err := h.Bus.Lookup(ctx, object)
	if err != nil {
		return errorReply(req.ID, callError(err))
	}
	if !hasPath(objs, object) {
		return errorReply(req.ID, errObject)
	}
	sess, ok := h.Sessions.Get(sid)
	if !ok || !sess.Allowed(h.ACL, object, method) {
		return errorReply(req.ID, errAccess)
	}
	if _, ok := fields["ubus_rpc_session"]; ok {
		return errorReply(req.ID, errParams)
	}
	// uhttpd appends the caller's session id to the arguments.
	withSID, err := appendField(args, "ubus_rpc_session", sid)
	if err != nil {
		return errorReply(req.ID, errInternal)
	}
	status, data, err := h.Bus.Call(ctx, object, method, withSID)
	if err != nil {
		return errorReply(req.ID, callError(err))
	}
	result := []byte(fmt.Sprintf("[%d", status))
	if d := bytes.TrimSpace(data); len(d) > 0 && !bytes.Equal(d, []byte("{}")) && !bytes.Equal(d, []byte("null")) {
		result = append(append(append(result, ','), d...), ']')
	} else {
		result = append(result, ']')
	}
	return reply{JSONRPC: "2.0", ID: idOrNull(req.ID), Result: result}
}

func callError(err error) rpcError {
	if errors.Is(err, context.DeadlineExceeded) {
		return errTimeout
	}
	return errInternal
}

func hasPath(objs []Object, p string) bool {
	for _, o := range objs {
		if o.Path == p {
			return true
		}
	}
	return false
}

// appendField adds "name":value as the last member of the JSON object obj,
// keeping the order of the members before it.
func appendField(obj json.RawMessage, name, value string) (json.RawMessage, error) {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("not a JSON object")
	}
	k, _ := json.Marshal(name)
	v, _ := json.Marshal(value)
	inner := bytes.TrimSpace(obj[1 : len(obj)-1])
	var b bytes.Buffer
	b.WriteByte('{')
	if len(inner) > 0 {
		b.Write(inner)
		b.WriteByte(',')
	}
	b.Write(k)
	b.WriteByte(':')
	b.Write(v)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// list handles {"method":"list"} (all object paths) and
// {"method":"list","params":["pattern", ...]} (signatures by object).
func (h *RPCHandler) list(ctx context.Context, req rpcRequest) reply {
	var patterns []string
	verbose := false
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && p[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(p, &raw); err != nil {
			return errorReply(req.ID, errParse)
		}
		verbose = true
		for _, r := range raw {
			var s string
			if json.Unmarshal(r, &s) == nil {
				patterns = append(patterns, s)
			}
		}
	}
	var b bytes.Buffer
	if !verbose {
		objs, err := h.objects(ctx, "")
		if err != nil {
			return errorReply(req.ID, callError(err))
		}
		paths := make([]string, 0, len(objs))
		for _, o := range objs {
			paths = append(paths, o.Path)
		}
		enc, _ := json.Marshal(paths)
		b.Write(enc)
		return reply{JSONRPC: "2.0", ID: idOrNull(req.ID), Result: b.Bytes()}
	}
	b.WriteByte('{')
	first := true
	for _, pat := range patterns {
		objs, err := h.objects(ctx, pat)
		if err != nil {
			return errorReply(req.ID, callError(err))
		}
		for _, o := range objs {
			if o.Methods == nil {
				continue // uhttpd skips objects without a signature
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			writeSignature(&b, o)
		}
	}
	b.WriteByte('}')
	return reply{JSONRPC: "2.0", ID: idOrNull(req.ID), Result: b.Bytes()}
}

// typeNames is uhttpd's naming of blobmsg types in a list reply.
var typeNames = map[int]string{1: "array", 2: "object", 3: "string", 5: "number", 7: "boolean"}

func writeSignature(b *bytes.Buffer, o Object) {
	k, _ := json.Marshal(o.Path)
	b.Write(k)
	b.WriteString(":{")
	for i, m := range o.Methods {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Name)
		b.Write(k)
		b.WriteString(":{")
		for j, a := range m.Args {
			if j > 0 {
				b.WriteByte(',')
			}
			name := typeNames[a.Type]
			if name == "" {
				name = "unknown"
			}
			k, _ := json.Marshal(a.Name)
			b.Write(k)
			b.WriteByte(':')
			v, _ := json.Marshal(name)
			b.Write(v)
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
}
