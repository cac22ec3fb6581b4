package loopback

import "testing"

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
