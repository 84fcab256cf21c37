package proxy_test

import "net/http"

func stripLLM(h http.Handler) http.Handler { return http.StripPrefix("/llm", h) }
