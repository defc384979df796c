// Package aws_test checks the CloudFormation template of deploy/aws by parsing it into typed
// resources with goformation: least-privilege IAM, the schedule, the asynchronous invocation's
// retries and on-failure destination, the alarms, and a time budget the configuration accepts.
package aws_test

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/sf2loki/sf2loki/config"
)

const templatePath = "sf2loki.yaml"

// Intrinsics resolve to readable placeholders: a parameter to its default, a pseudo parameter to
// a fixed value, a resource to <LogicalId> and an attribute to <LogicalId.Attribute>, so that
// the test compares exact ARNs.
func resolver(raw any) func(string) string {
	params := map[string]any{}
	if m, ok := raw.(map[string]any); ok {
		if ps, ok := m["Parameters"].(map[string]any); ok {
			params = ps
		}
	}
	pseudo := map[string]string{"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::StackName": "stack"}
	return func(name string) string {
		if v, ok := pseudo[name]; ok {
			return v
		}
		if p, ok := params[name].(map[string]any); ok {
			if d, ok := p["Default"]; ok {
				return fmt.Sprint(d)
			}
			return "<param:" + name + ">"
		}
		return "<" + name + ">"
	}
}

func parse(t *testing.T) *cloudformation.Template {
	t.Helper()
	ref := func(_ string, input any, raw any) any {
		name, _ := input.(string)
		r := resolver(raw)(name)
		if p, ok := raw.(map[string]any)["Parameters"].(map[string]any)[name].(map[string]any); ok {
			if d, ok := p["Default"]; ok {
				return d // keep numbers numbers
			}
		}
		return r
	}
	getAtt := func(_ string, input any, _ any) any {
		switch v := input.(type) {
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			return "<" + strings.Join(parts, ".") + ">"
		case string:
			return "<" + v + ">"
		}
		return nil
	}
	vars := regexp.MustCompile(`\$\{([^}]+)\}`)
	sub := func(_ string, input any, raw any) any {
		s, ok := input.(string)
		if !ok {
			return nil
		}
		res := resolver(raw)
		return vars.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			if strings.Contains(name, ".") {
				return "<" + name + ">"
			}
			return res(name)
		})
	}
	tpl, err := goformation.OpenWithOptions(templatePath, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{"Ref": ref, "Fn::GetAtt": getAtt, "Fn::Sub": sub},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// statement is one IAM statement with its actions and resources sorted.
type statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []string
	Condition string
}

func statements(t *testing.T, doc any) []statement {
	t.Helper()
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("policy document is %T", doc)
	}
	raw, _ := m["Statement"].([]any)
	var out []statement
	for _, r := range raw {
		s := r.(map[string]any)
		st := statement{Sid: fmt.Sprint(s["Sid"]), Effect: fmt.Sprint(s["Effect"]), Actions: strs(s["Action"]), Resources: strs(s["Resource"])}
		if c, ok := s["Condition"]; ok {
			st.Condition = fmt.Sprint(c)
		}
		if _, ok := s["NotAction"]; ok {
			t.Errorf("statement %s uses NotAction", st.Sid)
		}
		if _, ok := s["NotResource"]; ok {
			t.Errorf("statement %s uses NotResource", st.Sid)
		}
		out = append(out, st)
	}
	return out
}

func strs(v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		out = []string{x}
	case []any:
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
	}
	sort.Strings(out)
	return out
}

const (
	bucketARN = "arn:aws:s3:::<StateBucket>"
	logsARN   = "arn:aws:logs:us-east-1:123456789012:log-group:<LogGroup>:*"
)

// The function may read and write the checkpoint document, list only its key, read the
// configuration, write dead letters under their prefix, read the one secret and the one
// parameter, write its logs and send to its failure queue: nothing else, nothing wider.
func TestFunctionRoleIsLeastPrivilege(t *testing.T) {
	tpl := parse(t)
	role, err := tpl.GetIAMRoleWithName("FunctionRole")
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Policies) != 1 || len(role.ManagedPolicyArns) != 0 {
		t.Fatalf("the function role has %d inline policies and managed policies %v, want one inline policy", len(role.Policies), role.ManagedPolicyArns)
	}
	got := statements(t, role.Policies[0].PolicyDocument)
	want := []statement{
		{"CheckpointDocument", "Allow", []string{"s3:GetObject", "s3:PutObject"}, []string{bucketARN + "/sf2loki/state.json"}, ""},
		{"ListTheCheckpointKey", "Allow", []string{"s3:ListBucket"}, []string{bucketARN}, "map[StringEquals:map[s3:prefix:sf2loki/state.json]]"},
		{"Configuration", "Allow", []string{"s3:GetObject"}, []string{bucketARN + "/config/sf2loki.yaml"}, ""},
		{"DeadLetters", "Allow", []string{"s3:PutObject"}, []string{bucketARN + "/dead-letters/*"}, ""},
		{"SalesforceSecret", "Allow", []string{"secretsmanager:GetSecretValue"}, []string{"<param:SalesforceSecretArn>"}, ""},
		{"LokiPassword", "Allow", []string{"ssm:GetParameter"}, []string{"arn:aws:ssm:us-east-1:123456789012:parameter/sf2loki/loki-password"}, ""},
		{"Logs", "Allow", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, []string{logsARN}, ""},
		{"OnFailureDestination", "Allow", []string{"sqs:SendMessage"}, []string{"<FailureQueue.Arn>"}, ""},
	}
	compareStatements(t, "FunctionRole", got, want)
	assume := statements(t, role.AssumeRolePolicyDocument)
	if len(assume) != 1 || !reflect.DeepEqual(assume[0].Actions, []string{"sts:AssumeRole"}) ||
		!strings.Contains(fmt.Sprint(role.AssumeRolePolicyDocument), "lambda.amazonaws.com") {
		t.Errorf("the function role is assumable by %v", role.AssumeRolePolicyDocument)
	}
}

// The scheduler may invoke this function and nothing else.
func TestSchedulerRoleInvokesOnlyTheFunction(t *testing.T) {
	tpl := parse(t)
	role, err := tpl.GetIAMRoleWithName("SchedulerRole")
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Policies) != 1 {
		t.Fatalf("%d policies", len(role.Policies))
	}
	compareStatements(t, "SchedulerRole", statements(t, role.Policies[0].PolicyDocument), []statement{
		{"InvokeTheFunction", "Allow", []string{"lambda:InvokeFunction"}, []string{"<Function.Arn>"}, ""},
	})
	if doc := fmt.Sprint(role.AssumeRolePolicyDocument); !strings.Contains(doc, "scheduler.amazonaws.com") || !strings.Contains(doc, "aws:SourceAccount:123456789012") {
		t.Errorf("the scheduler role's trust policy %s is not limited to EventBridge Scheduler in this account", doc)
	}
	if roles := tpl.GetAllIAMRoleResources(); len(roles) != 2 {
		t.Errorf("%d roles, want the function's and the scheduler's", len(roles))
	}
}

func compareStatements(t *testing.T, role string, got, want []statement) {
	t.Helper()
	for _, s := range got {
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				t.Errorf("%s: statement %s allows the wildcard action %q", role, s.Sid, a)
			}
		}
		for _, r := range s.Resources {
			if r == "*" || strings.HasSuffix(r, ":::*") || strings.HasSuffix(r, "/*") && !strings.HasSuffix(r, "/dead-letters/*") {
				t.Errorf("%s: statement %s allows the resource %q, wider than its object", role, s.Sid, r)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s statements differ:\n got  %+v\n want %+v", role, got, want)
	}
}

// EventBridge Scheduler fires on time (no flexible window) at the period sf2loki is told, and
// Lambda never retries a failed run by itself: failures go to the SQS on-failure destination.
func TestScheduleRetriesAndOnFailureDestination(t *testing.T) {
	tpl := parse(t)
	s, err := tpl.GetSchedulerScheduleWithName("Schedule")
	if err != nil {
		t.Fatal(err)
	}
	if s.ScheduleExpression != "rate(5 minutes)" || s.FlexibleTimeWindow == nil || s.FlexibleTimeWindow.Mode != "OFF" {
		t.Errorf("schedule %q, flexible window %+v; want rate(5 minutes) with the window OFF", s.ScheduleExpression, s.FlexibleTimeWindow)
	}
	if s.Target == nil || s.Target.Arn != "<Function.Arn>" || s.Target.RoleArn != "<SchedulerRole.Arn>" {
		t.Errorf("schedule target %+v", s.Target)
	}
	cfg, err := tpl.GetLambdaEventInvokeConfigWithName("FunctionInvokeConfig")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FunctionName != "<Function>" || cfg.MaximumRetryAttempts == nil || *cfg.MaximumRetryAttempts != 0 {
		t.Errorf("invoke config of %s has MaximumRetryAttempts %v, want 0", cfg.FunctionName, cfg.MaximumRetryAttempts)
	}
	if cfg.DestinationConfig == nil || cfg.DestinationConfig.OnFailure == nil || cfg.DestinationConfig.OnFailure.Destination != "<FailureQueue.Arn>" {
		t.Errorf("on-failure destination %+v, want the SQS queue", cfg.DestinationConfig)
	}
	if _, err := tpl.GetSQSQueueWithName("FailureQueue"); err != nil {
		t.Error(err)
	}
}

// Every outcome that needs a human pages at once, partial pages when it repeats, unavailable is
// counted only, and the failure queue's depth alarms.
func TestAlarmsByOutcomeAndQueueDepth(t *testing.T) {
	tpl := parse(t)
	filters := map[string]string{} // metric name -> outcome matched
	for name, f := range tpl.GetAllLogsMetricFilterResources() {
		if f.LogGroupName != "<LogGroup>" || len(f.MetricTransformations) != 1 || f.MetricTransformations[0].MetricNamespace != "sf2loki" {
			t.Errorf("metric filter %s: %+v", name, f)
			continue
		}
		m := regexp.MustCompile(`^\{ \$\.outcome = "([a-z_]+)" && \$\.exit_code >= 0 \}$`).FindStringSubmatch(f.FilterPattern)
		if m == nil {
			t.Errorf("metric filter %s matches %q, not one outcome of the run report", name, f.FilterPattern)
			continue
		}
		filters[f.MetricTransformations[0].MetricName] = m[1]
	}
	wantFilters := map[string]string{"OutcomeUnavailable": "unavailable", "OutcomePartial": "partial", "OutcomeIntegrity": "integrity",
		"OutcomeConfigError": "config_error", "OutcomeInternalError": "internal_error"}
	if !reflect.DeepEqual(filters, wantFilters) {
		t.Errorf("metric filters %v, want %v", filters, wantFilters)
	}
	paged := map[string]float64{}
	for name, a := range tpl.GetAllCloudWatchAlarmResources() {
		if !slices.Equal(a.AlarmActions, []string{"<param:AlarmTopicArn>"}) || a.Threshold == nil || a.MetricName == nil || a.Namespace == nil {
			t.Errorf("alarm %s does not page the alarm topic: %+v", name, a)
			continue
		}
		key := *a.Namespace + "/" + *a.MetricName
		if *a.Namespace == "AWS/SQS" {
			if len(a.Dimensions) != 1 || a.Dimensions[0].Name != "QueueName" || a.Dimensions[0].Value != "<FailureQueue.QueueName>" {
				t.Errorf("alarm %s watches %+v, not the failure queue", name, a.Dimensions)
			}
		}
		paged[key] = *a.Threshold
	}
	wantPaged := map[string]float64{"sf2loki/OutcomeIntegrity": 1, "sf2loki/OutcomeConfigError": 1, "sf2loki/OutcomeInternalError": 1,
		"sf2loki/OutcomePartial": 3, "AWS/SQS/ApproximateNumberOfMessagesVisible": 12}
	if !reflect.DeepEqual(paged, wantPaged) {
		t.Errorf("alarms (metric -> threshold) %v, want %v (unavailable only counts)", paged, wantPaged)
	}
}

// The function: arm64 provided.al2023 bootstrap, the benchmarked memory, its state bucket
// versioned, private and encrypted, and an environment whose time budget sf2loki accepts.
func TestFunctionBucketAndTimeBudget(t *testing.T) {
	tpl := parse(t)
	fn, err := tpl.GetLambdaFunctionWithName("Function")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Runtime == nil || *fn.Runtime != "provided.al2023" || fn.Handler == nil || *fn.Handler != "bootstrap" || !slices.Equal(fn.Architectures, []string{"arm64"}) {
		t.Errorf("function runtime %v handler %v architectures %v", fn.Runtime, fn.Handler, fn.Architectures)
	}
	if fn.MemorySize == nil || *fn.MemorySize != 256 || fn.Timeout == nil || *fn.Timeout != 240 {
		t.Errorf("memory %v timeout %v, want 256 MB and 240 s", fn.MemorySize, fn.Timeout)
	}
	b, err := tpl.GetS3BucketWithName("StateBucket")
	if err != nil {
		t.Fatal(err)
	}
	pab := b.PublicAccessBlockConfiguration
	if b.VersioningConfiguration == nil || b.VersioningConfiguration.Status != "Enabled" || pab == nil ||
		!allTrue(pab.BlockPublicAcls, pab.BlockPublicPolicy, pab.IgnorePublicAcls, pab.RestrictPublicBuckets) ||
		b.BucketEncryption == nil || len(b.BucketEncryption.ServerSideEncryptionConfiguration) == 0 {
		t.Errorf("state bucket: versioning %+v, public access block %+v, encryption %+v", b.VersioningConfiguration, pab, b.BucketEncryption)
	}

	vars := fn.Environment.Variables
	if vars["SF2LOKI_RUN__DEADLINE"] != "240s" || vars["SF2LOKI_RUN__SCHEDULE_PERIOD"] != "5m" || vars["SF2LOKI_LEASE__TYPE"] != "store" ||
		vars["SF2LOKI_CONFIG"] != "s3://<StateBucket>/config/sf2loki.yaml" || vars["SF2LOKI_SINK__LOKI__DEAD_LETTER_PATH"] != "s3://<StateBucket>/dead-letters/" ||
		vars["SF2LOKI_STATE__S3__KEY"] != "sf2loki/state.json" {
		t.Errorf("environment %v", vars)
	}
	// The defaults of every other key, with the template's environment, pass sf2loki's own
	// time-budget checks (max_duration within the function timeout, the lease within the period).
	var environ []string
	for k, v := range vars {
		if k != "SF2LOKI_CONFIG" {
			environ = append(environ, k+"="+v)
		}
	}
	if _, err := config.Load(config.LoadOptions{Environ: environ}); err != nil {
		t.Errorf("the template's environment is not a valid configuration: %v", err)
	}
	short := append(slices.Clone(environ), "SF2LOKI_RUN__DEADLINE=120s")
	if _, err := config.Load(config.LoadOptions{Environ: short}); err == nil || !strings.Contains(err.Error(), "run.max_duration") {
		t.Errorf("a 120 s timeout with the default max_duration: %v, want the budget check to name run.max_duration", err)
	}
}

func allTrue(bs ...*bool) bool {
	for _, b := range bs {
		if b == nil || !*b {
			return false
		}
	}
	return true
}
