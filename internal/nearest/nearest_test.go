package nearest

import "testing"

func TestClosest(t *testing.T) {
	flags := []string{"timeout", "timeout-ms", "progress", "json", "task-queue", "address"}
	settings := []string{"taskMaxEvents", "taskMaxConcurrency", "extend_timeout_debounce", "maxDepth", "permissions", "outputMaxChars"}
	for _, tc := range []struct {
		in   string
		from []string
		want string
	}{
		{"tiemout", flags, "timeout"},
		{"timeuot", flags, "timeout"},
		{"timout", flags, "timeout"},
		{"time", flags, "timeout"},
		{"timeout-m", flags, "timeout-ms"},
		{"JSON", flags, "json"},
		{"jsn", flags, "json"},
		{"prog", flags, "progress"},
		{"task", flags, "task-queue"},
		{"adress", flags, "address"},
		{"t", flags, ""},
		{"xyz", flags, ""},
		{"verbose", flags, ""},
		{"taskMaxEvnts", settings, "taskMaxEvents"},
		{"task_max_events", settings, "taskMaxEvents"},
		{"extendTimeoutDebounce", settings, "extend_timeout_debounce"},
		{"maxdepth", settings, "maxDepth"},
		{"permisions", settings, "permissions"},
		{"finder", settings, ""},
	} {
		if got := Closest(tc.in, tc.from); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
