package loopback

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
)

func TestHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "localhost": true, "LOCALHOST": true, "LocalHost": true,
		"": false, "0.0.0.0": false, "::": false, "::2": false, "10.0.0.1": false, "example.com": false,
		"localhost.example.com": false, "[::1]": false, "127.0.0.1:80": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestDialRefusesOtherHosts: names and addresses off loopback are refused
// before any connection (the dialer under it records, and connects to
// nothing); localhost is taken as 127.0.0.1 without a resolver.
func TestDialRefusesOtherHosts(t *testing.T) {
	var dialled []string
	dial = func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		return nil, errors.New("recorded, not connected")
	}
	t.Cleanup(func() { dial = (&net.Dialer{}).DialContext })
	for _, addr := range []string{"10.0.0.1:80", "169.254.169.254:80", "example.com:80", "[::ffff:10.0.0.1]:80", "nohost"} {
		if _, err := Dial(t.Context(), "tcp", addr); err == nil || len(dialled) != 0 {
			t.Errorf("Dial(%s): %v, dialled %v; want refused, nothing dialled", addr, err, dialled)
		}
	}
	for _, addr := range []string{"127.0.0.1:9", "localhost:9", "[::1]:9"} {
		Dial(t.Context(), "tcp", addr)
	}
	if want := []string{"127.0.0.1:9", "127.0.0.1:9", "[::1]:9"}; !slices.Equal(dialled, want) {
		t.Errorf("dialled %v, want %v", dialled, want)
	}
}
