package config

import (
	"net/url"
	"strings"

	"github.com/sf2loki/sf2loki/salesforce"
)

// Environment is the kind of org a salesforce section connects to: production or sandbox. It
// only picks the generic login host; a My Domain login_url needs no environment.
type Environment string

// The environments.
const (
	EnvironmentProduction Environment = "production"
	EnvironmentSandbox    Environment = "sandbox"
)

// environmentOfHost names the environment a login host belongs to ("" when it does not say):
// the two generic hosts, and the enhanced-domain sandbox form <domain>--<name>.sandbox.my.salesforce.com.
func environmentOfHost(host string) Environment {
	host = strings.ToLower(host)
	switch {
	case host == "login.salesforce.com":
		return EnvironmentProduction
	case host == "test.salesforce.com", strings.HasSuffix(host, ".sandbox.my.salesforce.com"):
		return EnvironmentSandbox
	}
	return ""
}

// EffectiveLoginURL is the OAuth host the client uses: login_url when set (it wins over
// environment), else the generic host of environment (production when empty).
func (s Salesforce) EffectiveLoginURL() string {
	if s.LoginURL != "" {
		return s.LoginURL
	}
	if s.Environment == EnvironmentSandbox {
		return salesforce.SandboxLoginURL
	}
	return salesforce.ProductionLoginURL
}

// validateEnvironment checks the environment's value and that an explicit login_url does not
// name the other environment's host.
func validateEnvironment(s Salesforce, path string, errs *Errors) {
	switch s.Environment {
	case "", EnvironmentProduction, EnvironmentSandbox:
	default:
		msg := "%q is not one of production, sandbox"
		if sug := suggest(string(s.Environment), []string{"production", "sandbox"}); sug != "" {
			msg += "; did you mean \"" + sug + "\"?"
		}
		errs.add(join(path, "environment"), msg, s.Environment)
		return
	}
	if s.Environment == "" || s.LoginURL == "" {
		return
	}
	u, err := url.Parse(s.LoginURL)
	if err != nil {
		return // reported for login_url
	}
	if env := environmentOfHost(u.Hostname()); env != "" && env != s.Environment {
		errs.add(join(path, "environment"), "is %s but login_url %s is a %s login host: remove one of them (login_url, when set, wins over environment)",
			s.Environment, u.Hostname(), env)
	}
}
