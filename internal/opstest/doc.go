// Package opstest is the end-to-end suite of sf2loki's operator commands (doctor, state, lease,
// backfill): it runs the real command line, in process or as child processes of the test
// binary, against the simulated org (internal/sim/salesforce), the strict receiver
// (internal/sim/loki) and the real store and lease servers of internal/testenv.
//
// It holds no production code: only tests and their helpers.
package opstest
