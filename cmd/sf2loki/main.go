// Command sf2loki ships Salesforce Event Monitoring data into Grafana Loki. See cli for commands.
package main

import (
	"os"

	"github.com/sf2loki/sf2loki/cli"
)

func main() {
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
}
