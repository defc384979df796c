{{/*
sf2loki.podSpec: the pod of a CronJob run or of the scheduler Deployment. The security context
is not taken from values (only the numeric identity is, and each of its numbers may be null so
that a platform such as OpenShift assigns it): non-root, read-only root filesystem, no
capabilities, no privilege escalation, RuntimeDefault seccomp. The ServiceAccount token is
mounted only when the lease or the store talks to the Kubernetes API.
Input: dict "root" "args" "env" "resources" "restartPolicy" "grace" "ports" "probes".
*/}}
{{- define "sf2loki.podSpec" -}}
{{- $root := .root -}}
{{- $access := include "sf2loki.access" $root | fromJson -}}
{{- $id := default dict $root.Values.podSecurity -}}
{{- $conf := include "sf2loki.configObject" $root | fromJson -}}
serviceAccountName: {{ include "sf2loki.serviceAccountName" $root }}
automountServiceAccountToken: {{ $access.token }}
restartPolicy: {{ .restartPolicy }}
terminationGracePeriodSeconds: {{ .grace }}
enableServiceLinks: false
securityContext:
  runAsNonRoot: true
  {{- range $k := list "runAsUser" "runAsGroup" "fsGroup" }}
  {{- /* A null in the values removes the key: the platform assigns the number. */}}
  {{- if and (hasKey $id $k) (not (kindIs "invalid" (get $id $k))) }}
  {{ $k }}: {{ int (get $id $k) }}
  {{- end }}
  {{- end }}
  seccompProfile:
    type: RuntimeDefault
{{- with include "sf2loki.imagePullSecrets" $root }}
imagePullSecrets:
  {{- . | nindent 2 }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- tpl (toYaml .) $root | nindent 2 }}
{{- end }}
containers:
  - name: sf2loki
    image: {{ include "sf2loki.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
    env:
      {{- toYaml .env | nindent 6 }}
      {{- with (.resources.limits | default dict).memory }}
      # 90% of the memory limit: the Go runtime collects harder before the kernel kills.
      - name: GOMEMLIMIT
        value: {{ include "sf2loki.goMemLimit" (dict "value" . "key" "resources.limits.memory") | quote }}
      {{- end }}
      {{- with (.resources.limits | default dict).cpu }}
      {{- if lt (include "sf2loki.cpus" (dict "value" . "key" "resources.limits.cpu") | float64) 1.0 }}
      # Less than one core of CPU time: the job's two stages gain nothing from two threads.
      - name: GOMAXPROCS
        value: "1"
      {{- end }}
      {{- end }}
      {{- with $root.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with $root.Values.extraEnvFrom }}
    envFrom:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .ports }}
    ports:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .probes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    resources:
      {{- toYaml .resources | nindent 6 }}
    securityContext:
      allowPrivilegeEscalation: false
      privileged: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      capabilities:
        drop:
          - ALL
      seccompProfile:
        type: RuntimeDefault
    volumeMounts:
      - name: config
        mountPath: /etc/sf2loki
        readOnly: true
      - name: tmp
        mountPath: /tmp
      {{- if ne $root.Values.secrets.source "none" }}
      - name: secrets
        mountPath: {{ $root.Values.secrets.mountPath }}
        readOnly: true
      {{- end }}
      {{- if $root.Values.persistence.enabled }}
      - name: state
        mountPath: {{ $root.Values.persistence.mountPath }}
      {{- end }}
      {{- with $root.Values.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: config
    {{- if eq $conf.kind "Secret" }}
    secret:
      secretName: {{ $conf.name }}
      defaultMode: 0440
      items:
        - key: config.yaml
          path: config.yaml
    {{- else }}
    configMap:
      name: {{ $conf.name }}
      items:
        - key: config.yaml
          path: config.yaml
    {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: {{ $root.Values.tmpSizeLimit }}
  {{- if ne $root.Values.secrets.source "none" }}
  - name: secrets
    secret:
      secretName: {{ include "sf2loki.secretName" $root }}
      defaultMode: 0440
  {{- end }}
  {{- if $root.Values.persistence.enabled }}
  - name: state
    persistentVolumeClaim:
      claimName: {{ include "sf2loki.pvcName" $root }}
  {{- end }}
  {{- with $root.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}
