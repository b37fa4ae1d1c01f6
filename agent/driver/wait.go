package driver

import (
	"context"
	"fmt"
	"sync"
)

// WaitDone implements Driver.WaitTask for a task whose end closes done: the
// returned channel gets result() once done is closed and is then closed; it
// is closed without a value if ctx ends first.
func WaitDone(ctx context.Context, done <-chan struct{}, result func() *ExitResult) <-chan *ExitResult {
	ch := make(chan *ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-done:
			ch <- result()
		case <-ctx.Done():
		}
	}()
	return ch
}

// LookupTask returns a driver's task id from tasks, read under mu, or an
// error wrapping ErrTaskNotFound. A nil entry (an ID reserved while its
// task starts) counts as unknown.
func LookupTask[T any](mu *sync.Mutex, tasks map[string]*T, id string) (*T, error) {
	mu.Lock()
	defer mu.Unlock()
	t := tasks[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	return t, nil
}
