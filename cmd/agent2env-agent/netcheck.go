package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// netcheck runs "netcheck listen PORT" or "netcheck connect ADDR SECONDS".
func netcheck(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 2 && args[0] == "listen":
		l, err := net.Listen("tcp", ":"+args[1])
		if err != nil {
			fmt.Fprintln(stderr, "agent2env-agent:", err)
			return 1
		}
		for {
			conn, err := l.Accept()
			if err != nil {
				fmt.Fprintln(stderr, "agent2env-agent:", err)
				return 1
			}
			conn.Close()
		}
	case len(args) == 3 && args[0] == "connect":
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		for i := range n {
			if i > 0 {
				time.Sleep(time.Second)
			}
			conn, cerr := net.DialTimeout("tcp", args[1], time.Second)
			if err = cerr; err == nil {
				conn.Close()
				fmt.Fprintln(stdout, "connected")
			} else {
				fmt.Fprintln(stdout, err)
			}
		}
		if err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprint(stderr, usage)
	return 2
}
