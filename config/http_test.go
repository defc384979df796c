package config

import (
	"net/http"
	"strings"
	"testing"
)

func TestProxyValidation(t *testing.T) {
	_, err := load(t, "http:\n  proxy: ftp://user:s3cr3t-pw@proxy:21\n  no_proxy: ['a b', '']\n")
	wantErrors(t, err, "http.proxy: must be an absolute URL with scheme http", "http.no_proxy[0]", "http.no_proxy[1]: is empty")
	if strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("the error repeats the proxy's password: %v", err)
	}
	_, err = load(t, "http:\n  no_proxy: [localhost]\n")
	wantErrors(t, err, "http.no_proxy: applies only with http.proxy")
	cfg := mustLoad(t, "http:\n  proxy: http://u:p@proxy.example.com:3128\n", "SF2LOKI_HTTP__NO_PROXY=10.0.0.0/8, .internal")
	if len(cfg.HTTP.NoProxy) != 2 || !strings.Contains(strings.Join(cfg.Secrets(), " "), "http://u:p@proxy.example.com:3128") {
		t.Errorf("no_proxy %v, secrets must include the proxy URL", cfg.HTTP.NoProxy)
	}
}

func TestNoProxyMatching(t *testing.T) {
	h := HTTP{Proxy: "http://proxy.example.com:3128", NoProxy: []string{
		"loki.internal", ".corp.example", "10.0.0.0/8", "192.168.1.7", "vault.example.com:8200", "*.svc",
	}}
	proxy := h.ProxyFunc()
	cases := map[string]bool{ // URL -> proxied
		"https://acme.my.salesforce.com/services/data":   true,
		"http://loki.internal:3100/loki/api/v1/push":     false,
		"http://a.loki.internal/push":                    false,
		"https://corp.example/x":                         true, // .domain: subdomains only
		"https://eu.corp.example/x":                      false,
		"http://10.1.2.3:3100/":                          false,
		"http://11.1.2.3:3100/":                          true,
		"http://192.168.1.7/":                            false,
		"https://vault.example.com:8200/":                false,
		"https://vault.example.com/":                     true, // another port
		"http://127.0.0.1:3100/":                         true, // loopback is proxied unless listed
		"http://loki.ns.svc:3100/":                       false,
		"https://LOGIN.salesforce.com/services/oauth2/x": true,
	}
	for raw, want := range cases {
		req, _ := http.NewRequest(http.MethodGet, raw, nil)
		u, err := proxy(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := u != nil; got != want {
			t.Errorf("%s proxied = %v, want %v", raw, got, want)
		}
	}
	if (HTTP{}).ProxyFunc() != nil {
		t.Error("no proxy configured must leave the environment default (nil)")
	}
	all := HTTP{Proxy: "http://p:1", NoProxy: []string{"*"}}.ProxyFunc()
	req, _ := http.NewRequest(http.MethodGet, "https://x.example.com", nil)
	if u, _ := all(req); u != nil {
		t.Error("no_proxy * must send everything direct")
	}
	bad := HTTP{Proxy: "::not a url"}.ProxyFunc()
	if _, err := bad(req); err == nil {
		t.Error("an invalid proxy must fail requests, not send them direct")
	}
}
