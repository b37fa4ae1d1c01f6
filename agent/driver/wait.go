package driver

import "context"

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
