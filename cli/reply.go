package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// replyOptions are `reply [--question QID] [--by WHO] ID MESSAGE...`.
type replyOptions struct {
	question, by, input string
}

func (o *replyOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.question, "question", "", "the question answered (its id in status); default: the first one that waits")
	fs.StringVar(&o.by, "by", "", "who answers (recorded in the history), e.g. the parent pi session's ID")
	fs.StringVar(&o.input, "input", "", "read the answer from this file, or - for stdin, instead of the arguments")
}

func (o *replyOptions) readsStdin() bool { return o.input == "-" }

func (o *replyOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	if len(cmd.args) == 0 {
		return errcode.New(errcode.InvalidInput, "usage: subagents reply [--question QID] ID ANSWER, or --input FILE")
	}
	req := client.ReplyRequest{ID: cmd.args[0], QuestionID: o.question, By: o.by, Message: strings.Join(cmd.args[1:], " ")}
	if o.input != "" {
		if len(cmd.args) > 1 {
			return errcode.New(errcode.InvalidInput, "give the answer as arguments or with --input, not both")
		}
		msg, err := readAnswer(cmd, o.input)
		if err != nil {
			return err
		}
		req.Message = msg
	}
	env, err := c.Reply(ctx, req)
	if err != nil {
		return err
	}
	return cmd.finishQuiet(env, func(env client.Envelope) {
		for _, it := range env.Items {
			if q := it.Question; q != nil {
				_, _ = fmt.Fprintf(cmd.io.Out, "%s: question %s answered; the child goes on with the answer\n", it.TaskID, q.ID)
			}
		}
	})
}

// readAnswer reads an answer from path, or stdin for "-": one byte past
// the most an answer may hold, so that a longer one is refused as such.
func readAnswer(cmd *command, path string) (string, error) {
	var r io.Reader = cmd.io.In
	if path != "-" {
		if !filepath.IsAbs(path) && cmd.io.Dir != "" {
			path = filepath.Join(cmd.io.Dir, path)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, api.MaxAnswerBytes+1))
	if err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, "answer: "+err.Error())
	}
	return string(b), nil
}

// questionsOptions are `questions [--cwd DIR] [--parent-session ID]`.
type questionsOptions struct {
	cwd, parent string
	limit       int
}

func (o *questionsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.cwd, "cwd", "", "only tasks in this folder")
	fs.StringVar(&o.parent, "parent-session", "", "only tasks of this parent pi session")
	fs.IntVar(&o.limit, "limit", 0, "at most this many (default 100)")
}

func (o *questionsOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	env, err := c.Questions(ctx, client.QuestionFilter{Cwd: o.cwd, ParentSessionID: o.parent, Limit: o.limit})
	if err != nil {
		return err
	}
	return cmd.finishQuiet(env, func(env client.Envelope) {
		if len(env.Items) == 0 {
			_, _ = fmt.Fprintln(cmd.io.Out, "No question waits for an answer.")
			return
		}
		for i, it := range env.Items {
			if i > 0 {
				_, _ = fmt.Fprintln(cmd.io.Out)
			}
			_, _ = fmt.Fprintln(cmd.io.Out, client.QuestionText(it))
		}
	})
}
