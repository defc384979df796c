// Package pubsubpb holds the generated protobuf messages and gRPC stubs of the Salesforce Pub/Sub
// API (eventbus.v1), produced from pubsub_api.proto by `make generate`. Do not edit the .pb.go
// files; change the .proto and regenerate.
package pubsubpb
