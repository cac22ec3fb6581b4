// Package loopback holds the one rule for which hosts are this machine's:
// where the API token may go over plain http, where the local servers
// (formsync simulate, cmd/bqfake) may listen, and which BigQuery endpoints
// are an emulator that gets no Google credentials.
package loopback

import (
	"context"
	"fmt"
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

// Dial connects to addr (host:port) only when its host is a loopback
// address or localhost, which it takes as 127.0.0.1 without asking a
// resolver; any other address is refused before anything is sent. It
// is the DialContext of clients that must never leave this machine
// (the simulator's webhook sender).
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("dialing %s: not a loopback address", addr)
	}
	return dial(ctx, network, net.JoinHostPort(host, port))
}

// dial makes the connections Dial allows; a test replaces it.
var dial = (&net.Dialer{}).DialContext
