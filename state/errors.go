package state

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// Errors returned by the store wrap one of these structs sentinels:
//   - structs.ErrNotFound: the object to change or delete does not exist.
//   - structs.ErrInvalid: the input is nil, has no ID, or is malformed.
//
// Any other error is a memdb failure, which is a bug.

func notFound(kind, id string) error {
	return fmt.Errorf("%s %q: %w", kind, id, structs.ErrNotFound)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", structs.ErrInvalid, fmt.Sprintf(format, a...))
}

// safeCopy runs copyFn and turns a panic (a Copy method meeting a nil
// element inside a malformed object) into an ErrInvalid error, so bad input
// never panics the FSM.
func safeCopy[T any](kind, id string, copyFn func() T) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = invalid("%s %q cannot be copied (malformed): %v", kind, id, r)
		}
	}()
	return copyFn(), nil
}
