// Package filestest has the network of a files fetcher under test: a
// resolver answering from a table and a dialer that connects to
// 127.0.0.1 alone, both recording what they were asked, so that a test of
// fetching (worker/files, the worker's files phase) never resolves a name
// or dials an address outside loopback.
//
//	res := &filestest.Resolver{T: t, Hosts: map[string][]string{"files.test": {"10.0.0.1"}}}
//	dial := &filestest.Dialer{T: t, Loopback: true}
//	fetcher, err := files.NewFetcher(files.FetcherConfig{Resolver: res, Dialer: dial, ...})
//	dial.Calls() // every address the fetcher dialled
package filestest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// Resolver resolves from a table and records what it was asked.
type Resolver struct {
	T     testing.TB
	Hosts map[string][]string
	// Next, when set, answers instead of Hosts (DNS rebinding).
	Next func(host string) []string

	mu    sync.Mutex
	asked []string
}

// LoopbackResolver resolves localhost to 127.0.0.1, and nothing else.
func LoopbackResolver(t testing.TB) *Resolver {
	return &Resolver{T: t, Hosts: map[string][]string{"localhost": {"127.0.0.1"}}}
}

// LookupIPAddr answers from the table (files.Resolver).
func (r *Resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	addrs, ok := r.Hosts[host]
	if r.Next != nil {
		addrs, ok = r.Next(host), true
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		out = append(out, net.IPAddr{IP: net.IP(ip.AsSlice()), Zone: ip.Zone()})
	}
	return out, nil
}

// Asked returns the names it was asked to resolve, in order.
func (r *Resolver) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// Dialer records each address dialled. It connects for real only to
// 127.0.0.1 and only when Loopback is set; any other address fails the
// test, unless Fake is set, in which case it is refused (ErrNoRoute)
// without a connection.
type Dialer struct {
	T        testing.TB
	Loopback bool
	Fake     bool

	mu      sync.Mutex
	dialled []string
}

// ErrNoRoute is what Dialer answers for an address it does not dial.
var ErrNoRoute = errors.New("no route (test dialer)")

// DialContext dials 127.0.0.1 when allowed (files.Dialer).
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialled = append(d.dialled, addr)
	d.mu.Unlock()
	host, _, _ := net.SplitHostPort(addr)
	if d.Loopback && host == "127.0.0.1" {
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	if !d.Fake {
		d.T.Errorf("dialled %s", addr)
	}
	return nil, ErrNoRoute
}

// Calls returns the addresses dialled, in order.
func (d *Dialer) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialled...)
}
