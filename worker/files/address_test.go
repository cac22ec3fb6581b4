package files

import (
	"net/netip"
	"testing"
)

func TestAddressPolicy(t *testing.T) {
	t.Parallel()
	const (
		never   = iota // refused whatever is allowed
		public         // always allowed
		loop           // allowed with AllowLoopback
		private        // allowed with AllowPrivate
	)
	for addr, class := range map[string]int{
		"93.184.216.34": public, "2606:2800:220:1:248:1893:25c8:1946": public, "203.0.113.7": public,
		"127.0.0.1": loop, "127.1.2.3": loop, "::1": loop, "::ffff:127.0.0.1": loop, "64:ff9b::7f00:1": loop, "::127.0.0.1": loop,
		"10.0.0.1": private, "172.16.0.1": private, "172.31.255.255": private, "192.168.1.1": private, "fc00::1": private, "fd12::1": private,
		"100.64.0.1": private, "100.127.255.254": private, "::ffff:10.0.0.1": private, "::ffff:192.168.0.1": private, "64:ff9b::a00:1": private,
		"169.254.169.254": never, "169.254.0.1": never, "fe80::1": never, "fe80::1%eth0": never, "::ffff:169.254.169.254": never,
		"0.0.0.0": never, "0.1.2.3": never, "::": never, "::ffff:0.0.0.0": never,
		"224.0.0.1": never, "239.255.255.250": never, "ff02::1": never, "ff05::1:3": never, "255.255.255.255": never, "240.0.0.1": never,
		"64:ff9b:1::1": never,
	} {
		ip := netip.MustParseAddr(addr)
		for _, p := range []AddressPolicy{{}, {AllowLoopback: true}, {AllowPrivate: true}, {AllowLoopback: true, AllowPrivate: true}} {
			want := class == public || class == loop && p.AllowLoopback || class == private && p.AllowPrivate
			if got := p.refusal(ip) == ""; got != want {
				t.Errorf("%+v: %s allowed = %v, want %v (%q)", p, addr, got, want, p.refusal(ip))
			}
		}
	}
}

func TestMetadataHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"metadata.google.internal": true, "METADATA.google.internal.": true, "metadata": true,
		"metadata.google.internal.example.com": false, "example.com": false,
	} {
		if got := metadataHost(host); got != want {
			t.Errorf("metadataHost(%q) = %v, want %v", host, got, want)
		}
	}
}
