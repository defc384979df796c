package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HTTP configures outbound HTTP: the proxy of the Salesforce REST, Loki push, S3 and GCS clients.
type HTTP struct {
	Proxy   Secret   `yaml:"proxy" example:"http://proxy.example.com:3128" desc:"Proxy URL (http, https or socks5; user:password@ allowed, so the whole value is a secret: prefer proxy_file) for the Salesforce REST, Loki push, S3 (store and dead letters) and GCS clients; empty = HTTPS_PROXY, HTTP_PROXY and NO_PROXY from the environment, as before."`
	NoProxy []string `yaml:"no_proxy" example:"[loki.internal, 10.0.0.0/8]" desc:"Hosts reached directly although proxy is set: a host name (and its subdomains), .domain (subdomains only), an IP, a CIDR range, host:port, or * (nothing is proxied). Loopback addresses are proxied unless listed."`
}

// proxySchemes are the proxy URL schemes Go's HTTP transport speaks.
var proxySchemes = []string{"http", "https", "socks5", "socks5h"}

func (c *Config) validateHTTP(errs *Errors) {
	h := c.HTTP
	if h.Proxy != "" {
		if _, err := parseProxy(h.Proxy.Value()); err != nil {
			errs.add("http.proxy", "%v", err) // the value is a secret: never quoted
		}
	} else if len(h.NoProxy) > 0 {
		errs.add("http.no_proxy", "applies only with http.proxy (without it, set NO_PROXY in the environment)")
	}
	for i, e := range h.NoProxy {
		if _, err := parseNoProxy(e); err != nil {
			errs.add(fmt.Sprintf("http.no_proxy[%d]", i), "%v", err)
		}
	}
}

// parseProxy parses the proxy URL; errors never repeat the value (it may hold a password).
func parseProxy(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("is not a URL")
	}
	ok := false
	for _, s := range proxySchemes {
		ok = ok || strings.EqualFold(u.Scheme, s)
	}
	if !ok || u.Host == "" {
		return nil, fmt.Errorf("must be an absolute URL with scheme http, https, socks5 or socks5h and a host (http://proxy.example.com:3128)")
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("must not have a path or query: only scheme, credentials, host and port")
	}
	return u, nil
}

// noProxyRule is one no_proxy entry.
type noProxyRule struct {
	all    bool
	cidr   *net.IPNet
	ip     net.IP
	domain string // lower case, without a leading dot
	subs   bool   // .domain: subdomains only
	port   string // "" = any port
}

func parseNoProxy(e string) (noProxyRule, error) {
	e = strings.ToLower(strings.TrimSpace(e))
	switch e {
	case "":
		return noProxyRule{}, fmt.Errorf("is empty")
	case "*":
		return noProxyRule{all: true}, nil
	}
	if _, n, err := net.ParseCIDR(e); err == nil {
		return noProxyRule{cidr: n}, nil
	}
	if ip := net.ParseIP(strings.Trim(e, "[]")); ip != nil {
		return noProxyRule{ip: ip}, nil
	}
	var r noProxyRule
	host := e
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, r.port = h, p
		if ip := net.ParseIP(h); ip != nil {
			r.ip = ip
			return r, nil
		}
	}
	if strings.HasPrefix(host, "*.") {
		host = host[1:]
	}
	if strings.HasPrefix(host, ".") {
		r.subs, host = true, host[1:]
	}
	if host == "" || strings.ContainsAny(host, "/*@ ") {
		return noProxyRule{}, fmt.Errorf("%q is not a host name, .domain, IP, CIDR range, host:port or *", e)
	}
	r.domain = host
	return r, nil
}

// matches reports whether a request to host (no brackets) and port goes direct.
func (r noProxyRule) matches(host, port string) bool {
	if r.all {
		return true
	}
	if r.port != "" && r.port != port {
		return false
	}
	ip := net.ParseIP(host)
	switch {
	case r.cidr != nil:
		return ip != nil && r.cidr.Contains(ip)
	case r.ip != nil:
		return ip != nil && r.ip.Equal(ip)
	}
	if host == r.domain {
		return !r.subs
	}
	return strings.HasSuffix(host, "."+r.domain)
}

// ProxyFunc returns the proxy selection of the http section for an HTTP transport, or nil when no
// proxy is configured (the clients then keep Go's environment-based default). Unlike NO_PROXY in
// Go's default, loopback hosts are proxied unless no_proxy lists them: an explicit proxy applies
// to every request it is not told to skip. Validate refuses a bad proxy or no_proxy entry; should
// one get here anyway, every request fails with the error rather than going direct.
func (h HTTP) ProxyFunc() func(*http.Request) (*url.URL, error) {
	if h.Proxy == "" {
		return nil
	}
	proxy, err := parseProxy(h.Proxy.Value())
	rules := make([]noProxyRule, 0, len(h.NoProxy))
	for _, e := range h.NoProxy {
		r, rerr := parseNoProxy(e)
		if rerr != nil && err == nil {
			err = fmt.Errorf("no_proxy: %w", rerr)
		}
		rules = append(rules, r)
	}
	if err != nil {
		err = fmt.Errorf("http.proxy: %w", err)
		return func(*http.Request) (*url.URL, error) { return nil, err }
	}
	return func(req *http.Request) (*url.URL, error) {
		host, port := strings.ToLower(req.URL.Hostname()), req.URL.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[req.URL.Scheme]
		}
		for _, r := range rules {
			if r.matches(host, port) {
				return nil, nil
			}
		}
		return proxy, nil
	}
}
