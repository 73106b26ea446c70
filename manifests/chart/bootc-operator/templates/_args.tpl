{{/* Flags both processes take: log format and level. */}}
{{- define "bootc-operator.logArgs" -}}
- --log-format={{ .Values.logFormat }}
{{- with .Values.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- end -}}

{{/* Pod-level imagePullSecrets, if any. */}}
{{- define "bootc-operator.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The metrics flags both processes take (after --metrics-bind-address). */}}
{{- define "bootc-operator.metricsArgs" -}}
{{- if not .Values.metrics.secure }}
- --metrics-secure=false
{{- else if .Values.metrics.certSecret }}
- --metrics-cert-path={{ include "bootc-operator.metricsCertDir" . }}
{{- end }}
{{- end -}}

{{- define "bootc-operator.metricsCertDir" -}}
/var/run/bootc-operator/metrics-cert
{{- end -}}

{{/* The serving certificate's volume mount and volume (metrics.certSecret). */}}
{{- define "bootc-operator.metricsCertMount" -}}
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-cert
  mountPath: {{ include "bootc-operator.metricsCertDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "bootc-operator.metricsCertVolume" -}}
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-cert
  secret:
    secretName: {{ .Values.metrics.certSecret | quote }}
{{- end }}
{{- end -}}

{{/* A ServiceMonitor endpoint's scheme and credentials (metrics.secure). */}}
{{- define "bootc-operator.scrapeSecurity" -}}
{{- if .Values.metrics.secure -}}
scheme: https
authorization:
  type: Bearer
  credentials:
    name: {{ include "bootc-operator.fullname" . }}-metrics-scraper-token
    key: token
tlsConfig:
  {{- toYaml .Values.metrics.serviceMonitor.tlsConfig | nindent 2 }}
{{- else -}}
scheme: http
{{- end -}}
{{- end -}}
