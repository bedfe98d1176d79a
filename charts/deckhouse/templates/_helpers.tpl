{{- define "d8.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "d8.labels" -}}
heritage: deckhouse
module: {{ .module }}
app: {{ .app }}
{{- end -}}

{{- define "d8.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "d8.securityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{- define "d8.kubeRbacProxy" -}}
- name: kube-rbac-proxy
  image: {{ .root.Values.kubeRbacProxy.image }}
  args:
    - --secure-listen-address=$(POD_IP):{{ .port }}
    - --upstream=http://127.0.0.1:{{ .upstream }}/
    - --ignore-paths=/healthz
    - --stale-cache-interval=1h30m
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
  ports:
    - name: https-metrics
      containerPort: {{ .port }}
  resources:
    {{- toYaml .root.Values.kubeRbacProxy.resources | nindent 4 }}
  {{- include "d8.securityContext" . | nindent 2 }}
{{- end -}}
