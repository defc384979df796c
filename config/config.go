// Package config defines sf2loki's configuration: its schema (one Go struct tree whose tags carry
// defaults, descriptions, enums and secrets), loading from YAML with strict keys, environment
// overrides, secret files and ${ENV} interpolation, cross-field validation, and the generated
// example, reference and JSON Schema. Lower packages never import config: it produces their plain
// option structs.
//
// Struct tags understood by the schema mechanism:
//
//	yaml:"name"          the key
//	default:"value"      default, parsed like a YAML scalar of the field's type
//	desc:"text"          one-line description (example, reference, JSON Schema)
//	enum:"a|b|c"         allowed values
//	min:"n"              lower bound for integers
//	max:"n"              most entries of a list or map (default MaxEntries)
//	secret:"values"      a map of HTTP headers: the values of credential headers are secrets
//	example:"value"      value shown in the generated example when the default is empty
//
// A field of type Secret also accepts the sibling key <name>_file (the file's content, trailing
// newline trimmed, is the value).
package config

// Config is the whole configuration of sf2loki.
type Config struct {
	Salesforce Salesforce `yaml:"salesforce" desc:"Connection to the single Salesforce org (use orgs for several)."`
	Sources    Sources    `yaml:"sources" desc:"What the single org ships (with orgs, each entry has its own sources)."`
	Orgs       []Org      `yaml:"orgs" max:"100" desc:"Several orgs, each with its own auth and sources; entries get an org label and checkpoint keys an org=<name>: prefix."`
	Jobs       []Job      `yaml:"jobs" max:"100" desc:"Job groups: subsets of orgs and sources, each with its own schedule, lease and checkpoint document (empty = one job ships everything)."`
	Shape      Shape      `yaml:"shape" desc:"How records become Loki entries: transforms, sampling, labels and structured metadata."`
	Sink       Sink       `yaml:"sink" desc:"Where records go."`
	State      State      `yaml:"state" desc:"The checkpoint document: where it lives and how it is written (always compare-and-swap)."`
	Lease      Lease      `yaml:"lease" desc:"The lease that keeps two invocations from shipping at once and hands out the fencing epoch."`
	Run        Run        `yaml:"run" desc:"One invocation's time budget and the scheduler's numbers it is checked against."`
	Batch      Batch      `yaml:"batch" desc:"Size bounds of the batch one invocation ships."`
	Egress     Egress     `yaml:"egress" desc:"Caps on what is sent to Loki: rates and a daily byte budget (per job group)."`
	HTTP       HTTP       `yaml:"http" desc:"Outbound HTTP of the Salesforce REST, Loki push, S3 and GCS clients: an explicit proxy."`
	Schedule   Schedule   `yaml:"schedule" desc:"The embedded scheduler of 'sf2loki schedule'."`
	Log        Log        `yaml:"log" desc:"Process logs (stderr)."`
	Metrics    Metrics    `yaml:"metrics" desc:"OpenTelemetry metrics: OTLP/HTTP push (flushed before a run-once exits) and /metrics in schedule mode."`

	full *Config // set by ForJob: the configuration of every group
}

// Salesforce is how sf2loki authenticates to one org.
type Salesforce struct {
	Environment   Environment `yaml:"environment" desc:"production or sandbox: the login host when login_url is empty (login.salesforce.com or test.salesforce.com); empty = production. A login_url of the other environment's generic host is an error; any other login_url (your My Domain) wins."`
	LoginURL      string      `yaml:"login_url" example:"https://acme.my.salesforce.com" desc:"OAuth host: your My Domain URL (recommended); empty = the generic host of environment (login.salesforce.com, or test.salesforce.com for sandbox)."`
	InstanceURL   string      `yaml:"instance_url" desc:"Override of the instance URL returned with the token (normally empty)."`
	APIVersion    string      `yaml:"api_version" default:"62.0" desc:"REST API version, without the v."`
	AuthMode      string      `yaml:"auth_mode" default:"jwt_bearer" enum:"jwt_bearer|client_credentials" desc:"OAuth flow: jwt_bearer (private key) or client_credentials (My Domain only)."`
	ClientID      string      `yaml:"client_id" example:"3MVG9-consumer-key-of-your-connected-app" desc:"Consumer key of the connected app / external client app."`
	Username      string      `yaml:"username" example:"integration@example.com" desc:"Integration user (jwt_bearer only)."`
	PrivateKey    Secret      `yaml:"private_key" example:"/run/secrets/sf-jwt.key" desc:"PEM RSA private key whose certificate is on the app (jwt_bearer); prefer private_key_file."`
	ClientSecret  Secret      `yaml:"client_secret" desc:"Consumer secret (client_credentials); prefer client_secret_file."`
	OrgID         string      `yaml:"org_id" desc:"18-character org id; normally read from the token response."`
	TokenLifetime Duration    `yaml:"token_lifetime" default:"1h" desc:"Assumed session lifetime (Salesforce does not return it); at least 2m."`
	Timeout       Duration    `yaml:"timeout" default:"30s" desc:"Timeout of one HTTP request to Salesforce."`
	MaxRetries    int         `yaml:"max_retries" default:"4" min:"0" desc:"Retries of a failed request (5xx, transport errors) with exponential backoff; 0 sends each request once."`
	BatchSize     int         `yaml:"batch_size" default:"2000" min:"200" desc:"SOQL page size asked for with Sforce-Query-Options (200-2000)."`
	TLS           TLS         `yaml:"tls" desc:"TLS settings for Salesforce."`
	Limits        OrgLimits   `yaml:"limits" desc:"Sampling the org's /limits (daily API requests, storage, event allocations) into metrics and, optionally, Loki."`
}

// Org is one entry of the orgs list.
type Org struct {
	Name       string     `yaml:"name" example:"prod" desc:"Short name: the org label and the org=<name>: checkpoint key prefix."`
	Salesforce Salesforce `yaml:"salesforce" desc:"Connection to this org."`
	Sources    Sources    `yaml:"sources" desc:"What this org ships."`
	Sink       OrgSink    `yaml:"sink" desc:"Where this org's entries go, when not to sink.loki (its own tenant, receiver, credentials or labels)."`
}

// TLS holds client TLS options.
type TLS struct {
	CAFile             string `yaml:"ca_file" desc:"PEM bundle of CAs to trust in addition to the system pool."`
	CertFile           string `yaml:"cert_file" desc:"Client certificate (mutual TLS)."`
	KeyFile            string `yaml:"key_file" desc:"Client private key (mutual TLS)."`
	ServerName         string `yaml:"server_name" desc:"Override of the server name checked in the certificate."`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" desc:"Disable certificate verification. Never in production."`
}

// Sink holds the destinations.
type Sink struct {
	Loki Loki `yaml:"loki" desc:"Grafana Loki (or any Loki-push-compatible store)."`
}

// Loki configures the Loki push client.
type Loki struct {
	URL                string            `yaml:"url" default:"http://localhost:3100/loki/api/v1/push" desc:"Full push URL of the receiver itself: redirects are not followed, a 3xx answer holds the entries."`
	TenantID           string            `yaml:"tenant_id" desc:"X-Scope-OrgID header (multi-tenant Loki)."`
	Username           string            `yaml:"username" desc:"Basic auth user."`
	Password           Secret            `yaml:"password" desc:"Basic auth password; prefer password_file."`
	BearerToken        Secret            `yaml:"bearer_token" desc:"Bearer token; prefer bearer_token_file."`
	Headers            map[string]string `yaml:"headers" secret:"values" desc:"Extra HTTP headers on every push; values of credential headers (Authorization, X-API-Key, ...) are secrets, never printed."`
	TLS                TLS               `yaml:"tls" desc:"TLS settings for Loki."`
	Timeout            Duration          `yaml:"timeout" default:"10s" desc:"Timeout of one push request."`
	Encoding           string            `yaml:"encoding" default:"protobuf" enum:"protobuf|json" desc:"Wire encoding: protobuf+snappy, or JSON (debugging)."`
	Gzip               bool              `yaml:"gzip" desc:"Gzip JSON bodies (encoding json only)."`
	BatchTargetBytes   ByteSize          `yaml:"batch_target_bytes" default:"1MiB" desc:"Target compressed size of one push request."`
	BatchMaxBytes      ByteSize          `yaml:"batch_max_bytes" default:"4MiB" desc:"Hard cap on the uncompressed size of one push request (Loki's default burst is 6 MiB); at most 1GiB."`
	BatchMaxEntries    int               `yaml:"batch_max_entries" default:"20000" min:"1" desc:"Maximum entries in one push request."`
	MaxRetries         int               `yaml:"max_retries" default:"5" min:"0" desc:"Retries of one request (5xx, 429, transport errors) within the push timeout; 0 sends each request once. A request of several entries refused with 429 is split in halves after 3 refusals, or sooner when no retry or no time for one is left."`
	MinBackoff         Duration          `yaml:"min_backoff" default:"500ms" desc:"First retry delay."`
	MaxBackoff         Duration          `yaml:"max_backoff" default:"10s" desc:"Longest retry delay."`
	LineMaxBytes       ByteSize          `yaml:"line_max_bytes" default:"256KiB" desc:"Longer lines are truncated on a UTF-8 boundary and marked in structured metadata (sf2loki_truncated), unless the marker would break the receiver's structured-metadata limits; they are counted either way."`
	MaxAge             Duration          `yaml:"max_age" default:"168h" desc:"Oldest timestamp the receiver accepts (Loki reject_old_samples_max_age); sf2loki doctor measures it."`
	OutOfOrderWindow   Duration          `yaml:"out_of_order_window" default:"1h" desc:"How far behind its stream's newest entry the receiver accepts an entry (Loki: half of the ingester's max_chunk_age); sf2loki doctor measures it. See docs/ordering.md."`
	CreationGrace      Duration          `yaml:"creation_grace_period" default:"10m" desc:"How far in the future the receiver accepts a timestamp (Loki creation_grace_period)."`
	Restamp            bool              `yaml:"restamp" default:"true" desc:"An entry the receiver would refuse for its timestamp (older than max_age, beyond creation_grace_period, or more than out_of_order_window behind its stream's newest entry) is shipped with a timestamp the receiver accepts and its own time in structured metadata event_time. false: such entries follow on_permanent_reject. See docs/ordering.md."`
	StructuredMetadata bool              `yaml:"allow_structured_metadata" default:"true" desc:"The receiver stores structured metadata (Loki 3 allow_structured_metadata); false: entries carrying any are refused before sending, and restamp cannot keep the event time."`
	MetadataMaxBytes   ByteSize          `yaml:"metadata_max_bytes" default:"64KiB" desc:"Largest structured metadata of one entry the receiver accepts, names and values summed (Loki max_structured_metadata_size)."`
	MetadataMaxEntries int               `yaml:"metadata_max_entries" default:"128" min:"1" desc:"Most structured metadata pairs of one entry the receiver accepts (Loki max_structured_metadata_entries_count)."`
	Labels             map[string]string `yaml:"labels" desc:"Static stream labels added to every entry (allowlisted names only)."`
	ExtraLabels        []string          `yaml:"extra_labels" desc:"Label names allowed beyond the fixed allowlist (job, service_name, source, event_type, sf_org_id, environment, org, backfill) as static labels. Each static label of such a name is one more label on every stream: a type may promote one label fewer (shape.types[].labels)."`
	OnPermanentReject  string            `yaml:"on_permanent_reject" default:"drop" enum:"drop|freeze" desc:"Entries the receiver rejects for good: drop (count, dead-letter, advance) or freeze the key."`
	DeadLetterPath     string            `yaml:"dead_letter_path" desc:"File that receives dropped entries as JSON lines, or s3://bucket/prefix/ for one object per entry (optional)."`
}

// State configures the checkpoint document.
type State struct {
	Store     string         `yaml:"store" default:"file" enum:"file|s3|gcs|configmap" desc:"Backend of the checkpoint document."`
	File      FileState      `yaml:"file" desc:"store: file."`
	S3        S3State        `yaml:"s3" desc:"store: s3 (any S3 that honors If-Match / If-None-Match)."`
	GCS       GCSState       `yaml:"gcs" desc:"store: gcs."`
	ConfigMap ConfigMapState `yaml:"configmap" desc:"store: configmap (Kubernetes)."`
}

// FileState is the local-file backend.
type FileState struct {
	Path string `yaml:"path" default:"sf2loki-state.json" desc:"Path of the document; a shared volume for several hosts only if it honors flock."`
}

// S3State is the S3 backend.
type S3State struct {
	Bucket          string `yaml:"bucket" desc:"Bucket name."`
	Key             string `yaml:"key" default:"sf2loki/state.json" desc:"Object key of the document."`
	Region          string `yaml:"region" default:"us-east-1" desc:"Region."`
	Endpoint        string `yaml:"endpoint" desc:"Endpoint of an S3-compatible store (empty = AWS)."`
	PathStyle       bool   `yaml:"path_style" desc:"Path-style addressing (most S3-compatible stores)."`
	AccessKeyID     string `yaml:"access_key_id" desc:"Static access key id (empty = the AWS default credential chain)."`
	SecretAccessKey Secret `yaml:"secret_access_key" desc:"Static secret key; prefer secret_access_key_file."`
	SessionToken    Secret `yaml:"session_token" desc:"Session token for temporary credentials."`
}

// GCSState is the Google Cloud Storage backend.
type GCSState struct {
	Bucket          string `yaml:"bucket" desc:"Bucket name."`
	Object          string `yaml:"object" default:"sf2loki/state.json" desc:"Object name of the document."`
	Endpoint        string `yaml:"endpoint" desc:"Base URL of an emulator or private endpoint (empty = Google); sends no credentials unless credentials_file is set (then https only). STORAGE_EMULATOR_HOST is honoured too."`
	CredentialsFile string `yaml:"credentials_file" desc:"Service account JSON key (empty = application default credentials)."`
}

// ConfigMapState is the Kubernetes ConfigMap backend.
type ConfigMapState struct {
	Namespace  string `yaml:"namespace" desc:"Namespace (empty = the pod's namespace, else default)."`
	Name       string `yaml:"name" default:"sf2loki-state" desc:"ConfigMap name."`
	Key        string `yaml:"key" default:"state.json" desc:"Data key holding the document (1 MiB limit)."`
	Kubeconfig string `yaml:"kubeconfig" desc:"Kubeconfig file for out-of-cluster use (empty = in-cluster)."`
}

// Lease configures the lease.
type Lease struct {
	Type          string   `yaml:"type" default:"store" enum:"store|kubernetes" desc:"store: the lease lives in the checkpoint document; kubernetes: a coordination.k8s.io/v1 Lease."`
	Name          string   `yaml:"name" default:"sf2loki" desc:"Lease name, recorded in the document's fence; each job group and backfill has its own."`
	Namespace     string   `yaml:"namespace" desc:"Namespace of the Kubernetes Lease (empty = the pod's namespace, else default)."`
	Kubeconfig    string   `yaml:"kubeconfig" desc:"Kubeconfig file for out-of-cluster use (empty = in-cluster)."`
	Identity      string   `yaml:"identity" desc:"Holder name prefix (empty = pod name or hostname); a random invocation id is always appended."`
	Duration      Duration `yaml:"duration" default:"30s" desc:"Lease duration L: a holder that stops renewing loses it after this."`
	RenewInterval Duration `yaml:"renew_interval" default:"10s" desc:"Renew interval R; at most duration/3."`
	AcquireWait   Duration `yaml:"acquire_wait" desc:"How long to wait for a live holder before giving up as busy (0 = do not wait)."`
	MaxClockSkew  Duration `yaml:"max_clock_skew" default:"5s" desc:"Assumed maximum clock skew K between hosts."`
}

// Run is one invocation's time budget.
type Run struct {
	MaxDuration      Duration `yaml:"max_duration" default:"3m" desc:"Internal deadline D of one invocation, including push, commit and release."`
	PushTimeout      Duration `yaml:"push_timeout" default:"30s" desc:"Reserve P for one push including retries."`
	CommitTimeout    Duration `yaml:"commit_timeout" default:"15s" desc:"Reserve C for one checkpoint commit including verification."`
	ReleaseTimeout   Duration `yaml:"release_timeout" default:"2s" desc:"Reserve Rel for releasing the lease."`
	StartupReserve   Duration `yaml:"startup_reserve" default:"10s" desc:"Allowance T0 for process start-up (scheduling, image pull excluded)."`
	Margin           Duration `yaml:"margin" default:"5s" desc:"Safety margin in the time-budget invariants."`
	Drain            bool     `yaml:"drain" desc:"Repeat pull-push-commit until caught up or out of time (same as --drain)."`
	StrictExitCodes  bool     `yaml:"strict_exit_codes" desc:"Exit 5 for busy and 6 for fenced instead of 0 (same as --strict-exit-codes)."`
	SchedulePeriod   Duration `yaml:"schedule_period" desc:"Period S of the external schedule, when the scheduler passes it (the Helm chart does)."`
	Deadline         Duration `yaml:"deadline" desc:"The scheduler's hard deadline A (a Job's activeDeadlineSeconds), when passed."`
	TerminationGrace Duration `yaml:"termination_grace" desc:"Grace G between SIGTERM and SIGKILL (terminationGracePeriodSeconds), when passed."`
}

// Batch bounds one invocation's batch.
type Batch struct {
	MaxRecords int      `yaml:"max_records" default:"100000" min:"1" desc:"Stop pulling after this many records."`
	MaxBytes   ByteSize `yaml:"max_bytes" default:"256MiB" desc:"Stop pulling after this many line bytes."`
}

// Schedule configures 'sf2loki schedule'.
type Schedule struct {
	Spec         string   `yaml:"spec" default:"@every 5m" desc:"Cron spec (5 fields, @every, @hourly, CRON_TZ=...)."`
	Timezone     string   `yaml:"timezone" default:"UTC" desc:"Time zone of the spec when it has no CRON_TZ= prefix."`
	Jitter       Duration `yaml:"jitter" default:"5s" desc:"Random delay before each tick so replicas do not contend at the same instant."`
	Listen       string   `yaml:"listen" default:":8080" desc:"Address of /healthz, /readyz and /metrics (empty = off)."`
	UnreadyAfter int      `yaml:"unready_after" default:"3" min:"0" desc:"Consecutive failed ticks of one job (group) after which /readyz answers 503, until a tick of it succeeds again (0 = never). A tick fails when its outcome exits non-zero (unavailable, partial, integrity, config_error, internal); busy and fenced (another replica shipped) neither count nor end a series."`
}

// Log configures process logs.
type Log struct {
	Level  string `yaml:"level" default:"info" enum:"debug|info|warn|error" desc:"Minimum level."`
	Format string `yaml:"format" default:"json" enum:"json|text" desc:"Line format."`
}
