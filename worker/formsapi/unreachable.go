package formsapi

import (
	"errors"
	"net"
	"syscall"
)

// unreachable reports a transport failure that says the base URL points
// nowhere: the connection was refused, or the host name does not resolve.
// Before the API ever answered, retrying such a failure only delays the
// run's report of a wrong URL or port by the whole wait budget; the
// client gives up on it at once. Timeouts, resets and temporary DNS
// failures (a resolver that did not answer) keep their retries.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}
