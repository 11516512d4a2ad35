package main

import (
	"fmt"
	"io"
)

func cmdDead(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "hookline dead: not available in this build")
	return 1
}
