// Package loopback holds the one rule for which hosts are this machine's:
// where the API token may go over plain http, where the local servers
// (formsync simulate, cmd/bqfake) may listen, and which BigQuery endpoints
// are an emulator that gets no Google credentials.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host (no port, no brackets) is a loopback address
// (127.0.0.0/8, ::1) or the name localhost, in any case. Anything else, the
// empty host of ":8080" included, is not.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
