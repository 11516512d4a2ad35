package main

import (
	"io"

	"github.com/hookline/hookline/internal/adminclient"
)

// cmdDead is `hookline dead list|show|retry|delete`, a client of the admin
// API (token from HOOKLINE_ADMIN_TOKEN, server from --url or HOOKLINE_URL).
func cmdDead(args []string, stdout, stderr io.Writer) int {
	return adminclient.Main(args, stdout, stderr)
}
