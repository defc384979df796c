// Package lambda runs sf2loki as an AWS Lambda function: the same binary is a provided.al2023
// bootstrap when AWS_LAMBDA_RUNTIME_API is set. One Lambda invocation is one sf2loki invocation;
// this package supplies what differs from run-once — the run's deadline derived from the
// invocation's, outcomes mapped to function results, the configuration read from an S3 object
// or the environment, secret references resolved from AWS Secrets Manager and SSM Parameter
// Store, and dead letters written to S3 objects because the local disk does not last.
//
// Package cli wires it to job.Run through the same path as run-once (see cli/lambda.go).
package lambda
