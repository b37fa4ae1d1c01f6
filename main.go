// Command gpulayer runs GPU work on one laptop, one workstation or a fleet
// of mixed GPU hosts. See README.md.
package main

import (
	"os"

	"github.com/gpulayer/gpulayer/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
