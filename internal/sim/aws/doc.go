// Package aws is a simulated AWS Secrets Manager and SSM Parameter Store for tests: a faithful
// subset of their JSON protocols (POST / with X-Amz-Target, application/x-amz-json-1.1 bodies,
// errors as {"__type": ..., "message": ...} with the documented error types), so that the real
// aws-sdk-go-v2 clients (service/secretsmanager, service/ssm) talk to it unchanged through
// AWS_ENDPOINT_URL_SECRETS_MANAGER / AWS_ENDPOINT_URL_SSM or BaseEndpoint. It counts every call
// by operation, so tests can prove how often secrets were fetched.
//
// Served operations: Secrets Manager CreateSecret, GetSecretValue (by name, full or partial ARN;
// VersionStage AWSCURRENT/AWSPREVIOUS or VersionId), PutSecretValue (moves AWSCURRENT, keeps
// AWSPREVIOUS); SSM GetParameter (name or ARN, name:version selectors, SecureString values
// returned decrypted only WithDecryption) and PutParameter (Overwrite). Requests must be signed
// with Signature Version 4 for the right service (the signature itself is not verified); Deny
// makes one secret or parameter answer AccessDeniedException, as an IAM policy would.
//
// No AWS emulator can be installed here, so this stands in for the two services as
// internal/sim/salesforce stands in for Salesforce; S3 is never simulated (versitygw is real).
package aws
