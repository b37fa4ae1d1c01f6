// Command prog is the docker driver tests' task: a static binary put alone
// in a FROM scratch image. Its first argument picks what it does:
//
//	env NAME...      print NAME=value for each variable, then exit 0
//	exit N           print to stdout and stderr, then exit N
//	signal           print "ready", wait for a signal, print "got signal <number>", exit 0
//	sleep SECONDS    print "ready", sleep, print "done", exit 0
//	lines N SIZE [F] print N lines of SIZE bytes of JSON (after file F exists), exit 0
//	append FILE      append one line to FILE, exit 0
//	waitfile FILE    print "ready", wait until FILE exists, print "done", exit 0
//	swapdir D T      rename directory D to D.old, make D a symlink to T, exit 1
//	caps             print the CapEff line of /proc/self/status, exit 0
//	plant T N SIZE L...  make each L a symlink to T (a path the host may
//	                 resolve), then print N lines of SIZE bytes, exit 0
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prog env|exit|signal|sleep|lines|append ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "env":
		for _, n := range args {
			fmt.Printf("%s=%s\n", n, os.Getenv(n))
		}
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(code)
	case "signal":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGQUIT)
		fmt.Println("ready")
		s := <-ch
		fmt.Printf("got signal %d\n", int(s.(syscall.Signal)))
	case "sleep":
		secs, _ := strconv.ParseFloat(args[0], 64)
		fmt.Println("ready")
		time.Sleep(time.Duration(secs * float64(time.Second)))
		fmt.Println("done")
	case "lines":
		n, _ := strconv.Atoi(args[0])
		size, _ := strconv.Atoi(args[1])
		if len(args) > 2 {
			waitFile(args[2])
		}
		w := bufio.NewWriterSize(os.Stdout, 1<<16)
		for i := 0; i < n; i++ {
			head := fmt.Sprintf(`{"i":%d,"pad":"`, i)
			pad := size - len(head) - 3
			fmt.Fprintf(w, "%s%s\"}\n", head, strings.Repeat("x", max(pad, 0)))
		}
		w.Flush()
	case "append":
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintln(f, "ran once")
		f.Close()
	case "swapdir":
		_ = os.Rename(args[0], args[0]+".old")
		if err := os.Symlink(args[1], args[0]); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		fmt.Println("swapped")
		os.Exit(1)
	case "caps":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") {
				fmt.Println(l)
			}
		}
	case "plant":
		n, _ := strconv.Atoi(args[1])
		size, _ := strconv.Atoi(args[2])
		for _, l := range args[3:] {
			_ = os.Remove(l)
			if err := os.Symlink(args[0], l); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		for i := 0; i < n; i++ {
			head := fmt.Sprintf(`{"i":%d,"pad":"`, i)
			fmt.Printf("%s%s\"}\n", head, strings.Repeat("x", max(size-len(head)-3, 0)))
		}
	case "waitfile":
		fmt.Println("ready")
		waitFile(args[0])
		fmt.Println("done")
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func waitFile(path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
