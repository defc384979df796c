{{/*
sf2loki.podSpec: the pod of a CronJob run or of the scheduler Deployment. The security context
is not taken from values (only the numeric identity is): non-root, read-only root filesystem,
no capabilities, no privilege escalation, RuntimeDefault seccomp. The ServiceAccount token is
mounted only when the lease or the store talks to the Kubernetes API.
Input: dict "root" "args" "env" "resources" "restartPolicy" "grace" "ports" "probes".
*/}}
{{- define "sf2loki.podSpec" -}}
{{- $root := .root -}}
{{- $access := include "sf2loki.access" $root | fromJson -}}
{{- $id := $root.Values.podSecurity -}}
serviceAccountName: {{ include "sf2loki.serviceAccountName" $root }}
automountServiceAccountToken: {{ $access.token }}
restartPolicy: {{ .restartPolicy }}
terminationGracePeriodSeconds: {{ .grace }}
enableServiceLinks: false
securityContext:
  runAsNonRoot: true
  runAsUser: {{ int $id.runAsUser }}
  runAsGroup: {{ int $id.runAsGroup }}
  fsGroup: {{ int $id.fsGroup }}
  seccompProfile:
    type: RuntimeDefault
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
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
containers:
  - name: sf2loki
    image: {{ include "sf2loki.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
    env:
      {{- toYaml .env | nindent 6 }}
      {{- with ($root.Values.resources.limits | default dict).memory }}
      # The Go runtime collects harder before reaching the container's memory limit.
      - name: GOMEMLIMIT
        valueFrom:
          resourceFieldRef:
            containerName: sf2loki
            resource: limits.memory
      {{- end }}
      {{- with $root.Values.extraEnv }}
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
    configMap:
      name: {{ include "sf2loki.configMapName" $root }}
      items:
        - key: config.yaml
          path: config.yaml
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
