// Package layering holds the test that keeps sf2loki's package dependencies pointing one way
// (docs/architecture.md, "Packages"): cli → job → (source, loki, lease, store) → salesforce,
// with config read by cli only. `make lint` runs it.
package layering
