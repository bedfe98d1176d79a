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

{{- /* What a scraper must be allowed: `get` on the Deployment's prometheus-metrics, as
Deckhouse configures kube-rbac-proxy. */ -}}
{{- define "d8.metricsResource" -}}
namespace={{ .namespace }},apiGroup=apps,apiVersion=v1,resource=deployments,subresource=prometheus-metrics,name={{ .name }}
{{- end -}}

{{- define "d8.kubeRbacProxy" -}}
- name: kube-rbac-proxy
  image: {{ .root.Values.kubeRbacProxy.image }}
  args:
    - --secure-listen-address=$(POD_IP):{{ .port }}
    - --stale-cache-interval=1h30m
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: KUBE_RBAC_PROXY_CONFIG
      value: |
        excludePaths:
        - /healthz
        upstreams:
        - upstream: http://127.0.0.1:{{ .upstream }}/
          path: /
          authorization:
            resourceAttributes:
              namespace: {{ .root.Release.Namespace }}
              apiGroup: apps
              apiVersion: v1
              resource: deployments
              subresource: prometheus-metrics
              name: {{ .name }}
  ports:
    - name: https-metrics
      containerPort: {{ .port }}
  resources:
    {{- toYaml .root.Values.kubeRbacProxy.resources | nindent 4 }}
  {{- include "d8.securityContext" . | nindent 2 }}
{{- end -}}

{{- /* The keys of a webhook certificate Secret a webhook reads: not the CA's key, which only
`d8 controller` (its keeper) uses. */}}
{{- define "d8.webhookCertificateItems" -}}
items:
  - key: tls.crt
    path: tls.crt
  - key: tls.key
    path: tls.key
  - key: ca.crt
    path: ca.crt
{{- end -}}
