package files

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Resolver finds the addresses of a host name: a *net.Resolver.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Dialer connects to an address: a *net.Dialer. The fetcher gives it
// only IP literals it has checked.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// AddressPolicy says which addresses a fetch may connect to. Public
// addresses always; loopback and private ones when allowed; link-local
// (the cloud metadata address 169.254.169.254 among them), unspecified,
// multicast, broadcast and reserved ones never.
type AddressPolicy struct {
	// AllowLoopback lets a file be fetched from 127.0.0.0/8 and ::1: for
	// tests and the local demo only.
	AllowLoopback bool
	// AllowPrivate lets a file be fetched from private networks
	// (10/8, 172.16/12, 192.168/16, fc00::/7, and CGNAT's 100.64/10).
	AllowPrivate bool
}

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")
	compat4   = netip.MustParsePrefix("::/96")
)

// refusal is why ip is refused, "" when it is allowed. IPv4 addresses
// written as IPv6 (::ffff:10.0.0.1, and the NAT64 and IPv4-compatible
// forms, which reach the IPv4 address they embed) are judged as the
// IPv4 address.
func (p AddressPolicy) refusal(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if ip.Is6() && (nat64.Contains(ip) || compat4.Contains(ip) && ip.Compare(netip.IPv6Loopback()) > 0) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	} else if ip.Is6() && nat64Loc.Contains(ip) {
		return "a NAT64 address"
	}
	switch {
	case !ip.IsValid():
		return "no address"
	case ip.IsLoopback():
		if !p.AllowLoopback {
			return "a loopback address"
		}
	case ip.IsPrivate() || cgnat.Contains(ip):
		if !p.AllowPrivate {
			return "a private address"
		}
	case ip.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata among them)"
	case ip.IsUnspecified() || thisNet.Contains(ip):
		return "an unspecified address"
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || reserved4.Contains(ip):
		return "a reserved address"
	}
	return ""
}

// metadataHost is a name of the cloud metadata server, refused whatever
// it resolves to.
func metadataHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "metadata.google.internal" || host == "metadata"
}

// errNoAddress is a host that resolves to nothing.
var errNoAddress = errors.New("the host has no address")

// guardedDialer resolves a host itself, checks every address against the
// policy, and dials a checked address literally: what was checked is what
// is dialled, so DNS rebinding cannot slip between the two.
type guardedDialer struct {
	policy   AddressPolicy
	resolver Resolver
	dialer   Dialer
}

// DialContext is an http.Transport's DialContext.
func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if metadataHost(host) {
		return nil, &RefusedError{URL: addr, Why: "the cloud metadata server"}
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		found, err := d.resolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		for _, a := range found {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				return nil, fmt.Errorf("resolving %s: %q is no address", host, a.IP)
			}
			ips = append(ips, ip.Unmap().WithZone(a.Zone))
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("resolving %s: %w", host, errNoAddress)
	}
	// Every address must pass, not just the one dialled first: a host
	// that names a private address beside a public one is refused.
	for _, ip := range ips {
		if why := d.policy.refusal(ip); why != "" {
			return nil, &RefusedError{URL: addr, Addr: ip, Why: host + " resolves to " + why}
		}
	}
	var errs []error
	for _, ip := range ips {
		conn, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
