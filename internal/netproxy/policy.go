package netproxy

import (
	"net/netip"
	"strings"
)

// Policy says which hosts a sandbox may reach. The zero value allows
// nothing.
type Policy struct {
	// AllowAll allows any host (the template's allowInternetAccess). The
	// default dialer still refuses the daemon host's own addresses.
	AllowAll bool
	// Domains are the hosts allowed when AllowAll is not set (the
	// template's allowedDomains): an exact name ("api.example.com"), a
	// wildcard matching every subdomain of a name but not the name itself
	// ("*.example.com"), or an IP literal ("203.0.113.7", "2001:db8::1"),
	// which is the only way to allow a host given by address. Case and a
	// trailing dot do not matter; malformed entries allow nothing.
	Domains []string
}

// Allows reports whether host, a name or an IP literal without a port
// (brackets around an IPv6 literal are accepted), may be reached.
func (p Policy) Allows(host string) bool { return compile(p).allows(host) }

// matcher is a Policy prepared for lookups. It is immutable.
type matcher struct {
	all      bool
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	addrs    map[netip.Addr]bool
}

func compile(p Policy) *matcher {
	m := &matcher{all: p.AllowAll, names: map[string]bool{}, addrs: map[netip.Addr]bool{}}
	for _, d := range p.Domains {
		d = strings.TrimSpace(d)
		if a, ok := parseAddr(d); ok {
			m.addrs[a] = true
			continue
		}
		d = normalizeName(d)
		if rest, ok := strings.CutPrefix(d, "*."); ok {
			if validName(rest) {
				m.suffixes = append(m.suffixes, "."+rest)
			}
			continue
		}
		if validName(d) {
			m.names[d] = true
		}
	}
	return m
}

func (m *matcher) allows(host string) bool {
	if a, ok := parseAddr(host); ok {
		return m.all || m.addrs[a]
	}
	host = normalizeName(host)
	if !validName(host) {
		return false
	}
	if m.all || m.names[host] {
		return true
	}
	for _, s := range m.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// parseAddr parses an IP literal, bracketed or not. Zoned addresses are
// not literals a policy can name.
func parseAddr(s string) (netip.Addr, bool) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func normalizeName(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// validName reports whether s is a plausible DNS name: labels of letters,
// digits, '-' and '_' separated by single dots, 253 bytes at most.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
