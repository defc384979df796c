// Package eventlogfile is the EventLogFile source.
package eventlogfile
