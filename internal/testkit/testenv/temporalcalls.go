package testenv

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// TemporalCalls counts the gRPC calls Temporal clients make, by method and
// by the workflow each concerns, with the bytes of their requests. A call
// names its workflow in its request (a start, an update, a describe), in
// its answer (a poll that returned a task), or by its task token (a
// workflow task's completion, known from the poll or start that handed the
// task out). Calls that concern no workflow (a poll that returned empty, a
// namespace lookup) count under Unattributed. Add it to a client with
// Option; several clients may share one.
type TemporalCalls struct {
	mu     sync.Mutex
	calls  map[string]map[string]int // workflow id -> method -> calls
	bytes  map[string]map[string]int // workflow id -> method -> request bytes
	tokens map[string]string         // task token -> workflow id
}

// Unattributed is the workflow id under which calls that concern no
// workflow are counted.
const Unattributed = ""

// NewTemporalCalls is an empty count.
func NewTemporalCalls() *TemporalCalls {
	return &TemporalCalls{calls: map[string]map[string]int{}, bytes: map[string]map[string]int{}, tokens: map[string]string{}}
}

// Option adds the count to a client's options.
func (c *TemporalCalls) Option(o *client.Options) {
	o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(c.intercept))
}

// Of is the calls by method (its last path element, e.g.
// "StartWorkflowExecution") that concerned the workflow id.
func (c *TemporalCalls) Of(workflowID string) map[string]int {
	return c.copyOf(c.calls, workflowID)
}

// BytesOf is the request bytes by method of the calls that concerned the
// workflow id.
func (c *TemporalCalls) BytesOf(workflowID string) map[string]int {
	return c.copyOf(c.bytes, workflowID)
}

func (c *TemporalCalls) copyOf(m map[string]map[string]int, workflowID string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range m[workflowID] {
		out[k] = v
	}
	return out
}

// String lists every workflow's calls, for a test's log.
func (c *TemporalCalls) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.calls))
	for id := range c.calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		methods := make([]string, 0, len(c.calls[id]))
		for m := range c.calls[id] {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		b.WriteString(id + ":")
		for _, m := range methods {
			b.WriteString(" " + m + "=" + strconv.Itoa(c.calls[id][m]) + " (" + strconv.Itoa(c.bytes[id][m]) + " B)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (c *TemporalCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	name := method[strings.LastIndexByte(method, '/')+1:]
	size := 0
	if m, ok := req.(proto.Message); ok {
		size = proto.Size(m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.workflowOf(req)
	if err == nil {
		// A task handed out names its workflow, and its token then names
		// the workflow of the task's completion.
		for _, task := range handedOut(reply) {
			if task.GetWorkflowExecution().GetWorkflowId() != "" {
				c.tokens[string(task.GetTaskToken())] = task.GetWorkflowExecution().GetWorkflowId()
				if id == Unattributed {
					id = task.GetWorkflowExecution().GetWorkflowId()
				}
			}
		}
	}
	if c.calls[id] == nil {
		c.calls[id], c.bytes[id] = map[string]int{}, map[string]int{}
	}
	c.calls[id][name]++
	c.bytes[id][name] += size
	return err
}

// handedOut is the workflow or activity tasks an answer hands out.
func handedOut(reply any) []taskOut {
	switch r := reply.(type) {
	case *workflowservice.PollWorkflowTaskQueueResponse:
		return []taskOut{r}
	case *workflowservice.StartWorkflowExecutionResponse:
		if t := r.GetEagerWorkflowTask(); t != nil {
			return []taskOut{t}
		}
	case *workflowservice.RespondWorkflowTaskCompletedResponse:
		if t := r.GetWorkflowTask(); t != nil {
			return []taskOut{t}
		}
	case *workflowservice.PollActivityTaskQueueResponse:
		return []taskOut{r}
	}
	return nil
}

type taskOut interface {
	GetTaskToken() []byte
	GetWorkflowExecution() *commonpb.WorkflowExecution
}

// workflowOf is the workflow a request names, by id, execution or task
// token; Unattributed when it names none.
func (c *TemporalCalls) workflowOf(req any) string {
	switch r := req.(type) {
	case interface{ GetWorkflowId() string }:
		return r.GetWorkflowId()
	case interface {
		GetWorkflowExecution() *commonpb.WorkflowExecution
	}:
		return r.GetWorkflowExecution().GetWorkflowId()
	case interface {
		GetExecution() *commonpb.WorkflowExecution
	}:
		return r.GetExecution().GetWorkflowId()
	case *workflowservice.PollWorkflowExecutionUpdateRequest:
		return r.GetUpdateRef().GetWorkflowExecution().GetWorkflowId()
	case interface{ GetTaskToken() []byte }:
		return c.tokens[string(r.GetTaskToken())]
	}
	return Unattributed
}
