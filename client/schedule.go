package client

import "time"

// ScheduleItem is one schedule in `schedule list` and `schedule describe`
// (docs/schedules.md).
type ScheduleItem struct {
	ID     string `json:"id"`
	Note   string `json:"note,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	Paused bool   `json:"paused"`
	// NextFires are the next times it fires.
	NextFires []time.Time `json:"next_fires,omitempty"`
	UIURL     string      `json:"ui_url,omitempty"`
}
