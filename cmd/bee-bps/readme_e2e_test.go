// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestREADMEWalkthrough runs the README's walkthrough — Quick start,
// Publish and subscribe, Persistent publishing and catching up — as
// written: its commands are read from the README's ```sh blocks, and
// `make run` from the Makefile's recipe, then run in a directory of their
// own, in the README's order, on a cluster of full nodes and on one of
// light nodes (the Light nodes section's RUN_ARGS: "the commands above
// work unchanged"). What the test substitutes, and only that: `go run
// ./cmd/bee-bps` is the binary make run builds (built once), the cluster
// listens on loopback ports of its own (--api-addr 127.0.0.1:0, as the
// broker's documented :1633 in a URL), `make test` is this, and the
// placeholders are what the README says they are: <address> is keygen's
// output, <nodes[1].batch from bps-dev.json> is read from the cluster's
// bps-dev.json, <topic hex> is the topic sub reports. Between the blocks
// it does what the prose says: Ctrl-C on sub, "publish a few more the same
// way", "the next update". It asserts what the README documents: keygen
// prints the address, sub says it is connected and in which mode, prints
// {"index":0,"payload":"hello",...} and {"index":1,"payload":"world",...},
// pub continues the feed at the next index, the persistent pub succeeds
// (within pub's default timeout) the moment dev says the cluster is
// running, sub --from resumes where the stopped sub stopped, says
// recovered and prints every missed update in order before the live ones,
// and bee's GET /feeds answers the latest update and its index.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two dev clusters")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	w := parseWalkthrough(t, string(readme), string(makefile))
	bin := buildDevBinary(t)
	t.Run("full nodes", func(t *testing.T) { w.run(t, bin, nil) })
	t.Run("light nodes", func(t *testing.T) { w.run(t, bin, w.lightArgs) })
}

// walkthrough is what the README documents, read from it.
type walkthrough struct {
	// The commands of the ```sh blocks, in order, each as its words.
	commands [][]string
	// makeRun is the Makefile's run recipe, as words.
	makeRun []string
	// lightArgs is the Light nodes section's RUN_ARGS.
	lightArgs []string
	// curl is the URL of the curl the persistent section shows.
	curl string
	// live is what the README says sub prints for the live pub: index and
	// payload of each line.
	live []readmeLine
}

type readmeLine struct {
	Index   uint64 `json:"index"`
	Payload string `json:"payload"`
}

// section is the README's text from the heading start up to the heading
// end.
func section(t *testing.T, readme, start, end string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+start+"\n")
	if i < 0 {
		t.Fatalf("README: no %q section", start)
	}
	j := strings.Index(readme[i+1:], "\n"+end+"\n")
	if j < 0 {
		t.Fatalf("README: no %q section after %q", end, start)
	}
	return readme[i+1 : i+1+j]
}

var (
	fenced     = regexp.MustCompile("(?s)```sh\n(.*?)```")
	inlineCurl = regexp.MustCompile("`curl\\s+'([^'`]+)'`")
	lightRun   = regexp.MustCompile("`make run RUN_ARGS=([^`]+)`")
	documented = regexp.MustCompile("`(\\{\"index\":[^`]*),\\.\\.\\.\\}`")
	// placeholder is <…> in a command.
	placeholder = regexp.MustCompile(`<([^<>]+)>`)
	clusterRef  = regexp.MustCompile(`^nodes\[(\d+)\]\.(\w+) from bps-dev\.json$`)
)

func parseWalkthrough(t *testing.T, readme, makefile string) walkthrough {
	t.Helper()
	var w walkthrough
	text := section(t, readme, "## Quick start", "### Postage")
	for _, m := range fenced.FindAllStringSubmatch(text, -1) {
		block := strings.ReplaceAll(m[1], "\\\n", " ")
		for line := range strings.SplitSeq(block, "\n") {
			words, err := shellWords(line)
			if err != nil {
				t.Fatalf("README: %q: %v", line, err)
			}
			if len(words) > 0 {
				w.commands = append(w.commands, words)
			}
		}
	}
	if m := inlineCurl.FindStringSubmatch(text); m != nil {
		w.curl = m[1]
	} else {
		t.Fatal("README: the persistent section shows no curl of /feeds")
	}
	pubsub := section(t, readme, "### Publish and subscribe", "### Persistent publishing and catching up")
	for _, m := range documented.FindAllStringSubmatch(pubsub, -1) {
		var l readmeLine
		if err := json.Unmarshal([]byte(m[1]+"}"), &l); err != nil {
			t.Fatalf("README: %s…}: %v", m[1], err)
		}
		w.live = append(w.live, l)
	}
	if len(w.live) == 0 {
		t.Fatal("README: no documented sub output in Publish and subscribe")
	}
	light := section(t, readme, "### Light nodes", "### From JavaScript")
	m := lightRun.FindStringSubmatch(light)
	if m == nil {
		t.Fatal("README: the Light nodes section names no make run RUN_ARGS")
	}
	var err error
	if w.lightArgs, err = shellWords(m[1]); err != nil {
		t.Fatal(err)
	}

	// The run target's recipe: the line after "run: …".
	lines := strings.Split(makefile, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "run:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
			if w.makeRun, err = shellWords(lines[i+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(w.makeRun) < 2 || w.makeRun[0] != "bin/bee-bps-dev" || w.makeRun[1] != "dev" {
		t.Fatalf("Makefile: run's recipe is %q, want bin/bee-bps-dev dev …", w.makeRun)
	}
	return w
}

// shellWords splits a line as a POSIX shell would for the README's
// commands: blanks separate words, '…' and "…" quote, a # starting a word
// starts a comment. Anything else a shell would expand is refused.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c", c)
			}
			q := line[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, fmt.Errorf("%q: expansion in double quotes", q)
			}
			cur.WriteString(q)
			inWord = true
			i += j + 1
		case c == '<':
			// A placeholder of the README, spaces and all: one word.
			j := strings.IndexByte(line[i:], '>')
			if j < 0 {
				return nil, fmt.Errorf("%q: unterminated <", line)
			}
			cur.WriteString(line[i : i+j+1])
			inWord = true
			i += j
		case strings.HasPrefix(line[i:], "$(RUN_ARGS)"), strings.HasPrefix(line[i:], "$(RUN_KEYS)"): // the Makefile's
			cur.WriteString(line[i : i+len("$(RUN_ARGS)")])
			inWord = true
			i += len("$(RUN_ARGS)") - 1
		case strings.IndexByte("$`\\|&;()*?[]~!{}>", c) >= 0:
			return nil, fmt.Errorf("%q: %c is shell syntax this test does not run", line, c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// run runs the walkthrough on a cluster that make run RUN_ARGS=runArgs
// brings up.
func (w walkthrough) run(t *testing.T, bin string, runArgs []string) {
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var (
		cl      devCluster
		readyAt time.Time
		address string
		topic   string
		sub     *readmeProc
		printed []subLine // what the running sub has printed
		next    uint64    // the feed's next index
		stored  []string  // the persistent pub's words, to run again
	)
	// expand substitutes the README's placeholders in words.
	expand := func(words []string) []string {
		t.Helper()
		out := make([]string, 0, len(words))
		for _, word := range words {
			var bad []string
			word = placeholder.ReplaceAllStringFunc(word, func(p string) string {
				name := p[1 : len(p)-1]
				switch m := clusterRef.FindStringSubmatch(name); {
				case name == "address" && address != "":
					return address
				case name == "topic hex" && topic != "":
					return topic
				case m != nil:
					if v := clusterField(t, filepath.Join(work, "bps-dev.json"), m[1], m[2]); v != "" {
						return v
					}
				}
				bad = append(bad, p)
				return p
			})
			if len(bad) > 0 {
				t.Fatalf("README: %v: no value for the placeholder at this step", bad)
			}
			out = append(out, word)
		}
		return out
	}
	// cli is a bee-bps command of the README (go run ./cmd/bee-bps …), as
	// the built binary's arguments.
	cli := func(words []string) []string {
		if len(words) < 3 || words[0] != "go" || words[1] != "run" || words[2] != "./cmd/bee-bps" {
			return nil
		}
		return expand(words[3:])
	}
	// expectSub reads what sub prints for the updates from … to of payloads.
	expectSub := func(s *readmeProc, from uint64, payloads []string) []subLine {
		t.Helper()
		var got []subLine
		for i, p := range payloads {
			l := s.next(ctx, t)
			if l.Type != "" || l.Index == nil || *l.Index != from+uint64(i) || l.Payload != p || l.Owner != address {
				t.Fatalf("sub printed %s, want index %d %q of %s\nstderr: %s", l.raw, from+uint64(i), p, address, s.stderr)
			}
			got = append(got, l)
		}
		return got
	}
	payloadsOf := func(args []string) []string {
		// The messages are the arguments after the flags; the flags pub
		// takes here all have a value.
		for i := 0; i < len(args); i++ {
			if strings.HasPrefix(args[i], "--") {
				if !strings.Contains(args[i], "=") {
					i++
				}
				continue
			}
			if i > 0 { // args[0] is the command
				return args[i:]
			}
		}
		return nil
	}
	// pub runs a pub command of the README; it must confirm every message
	// at the feed's next indexes. It returns the messages.
	pub := func(args []string, what string) (from uint64, payloads []string) {
		t.Helper()
		began := time.Now()
		out := runREADMECommand(ctx, t, bin, work, args)
		from, payloads = next, payloadsOf(args)
		want := fmt.Sprintf("%d of %d messages delivered, indexes %d to %d", len(payloads), len(payloads), from, from+uint64(len(payloads))-1)
		if !strings.Contains(out, want) {
			t.Fatalf("%s: pub said\n%s\nwant %q", what, out, want)
		}
		t.Logf("%s: %d updates from index %d confirmed in %s", what, len(payloads), from, time.Since(began).Round(time.Millisecond))
		next += uint64(len(payloads))
		return from, payloads
	}

	for _, words := range w.commands {
		args := cli(words)
		switch {
		case len(words) == 2 && words[0] == "make" && words[1] == "run":
			dev := []string{}
			for _, a := range w.makeRun[1:] {
				if a == "$(RUN_ARGS)" {
					dev = append(dev, runArgs...)
					continue
				}
				if k, ok := strings.CutSuffix(a, "$(RUN_KEYS)"); ok { // kept in the walkthrough's directory
					a = k + filepath.Join(work, ".bps-dev-keys")
				}
				dev = append(dev, a)
			}
			dev = append(dev, "--"+optionNameAPIAddr, "127.0.0.1:0")
			i := indexOf(dev, "--"+optionNameDevInfoFile)
			if i < 0 || i+1 >= len(dev) || dev[i+1] != "bps-dev.json" {
				t.Fatalf("make run: %q writes no bps-dev.json", dev)
			}
			cl = runDevBinary(t, bin, work, filepath.Join(work, "bps-dev.json"), dev...)
			readyAt = time.Now()
			if runArgs != nil && (cl.Nodes[1].Name != "node-1" || cl.Nodes[len(cl.Nodes)-1].Name != devStorerName) {
				t.Fatalf("a light cluster: nodes %+v", cl.Nodes)
			}

		case len(words) == 2 && words[0] == "make" && words[1] == "test":
			// This test is part of it.

		case len(args) > 0 && args[0] == "keygen":
			out := strings.TrimSpace(runREADMECommand(ctx, t, bin, work, args))
			if b, err := hex.DecodeString(out); err != nil || len(b) != 20 {
				t.Fatalf("keygen printed %q, want the key's address", out)
			}
			address = out

		case len(args) > 0 && args[0] == "sub" && indexOf(args, "--from") < 0:
			if cl.Nodes == nil || address == "" {
				t.Fatal("README: sub before make run and keygen")
			}
			sub = startREADMEProc(t, bin, work, args)
			topic = sub.connected(ctx, t, address)

		case len(args) > 0 && args[0] == "pub" && indexOf(args, "--postage-batch-id") < 0:
			if sub == nil {
				t.Fatal("README: the live pub without a sub to watch it")
			}
			from, payloads := pub(args, "pub")
			printed = append(printed, expectSub(sub, from, payloads)...)
			// What the README says sub prints.
			if len(printed) < len(w.live) {
				t.Fatalf("sub printed %d lines, the README documents %d", len(printed), len(w.live))
			}
			for i, l := range w.live {
				if *printed[i].Index != l.Index || printed[i].Payload != l.Payload {
					t.Fatalf("sub printed %s, the README documents {\"index\":%d,\"payload\":%q,...}", printed[i].raw, l.Index, l.Payload)
				}
			}

		case len(args) > 0 && args[0] == "pub":
			if sub == nil {
				t.Fatal("README: the persistent pub without a sub to watch it")
			}
			stored = args
			// The first uploads of the cluster, moments after dev said it
			// runs: bee's pushsync has what it waits for (see waitStorage).
			from, payloads := pub(args, "persistent pub")
			printed = append(printed, expectSub(sub, from, payloads)...)
			took := time.Since(readyAt)
			t.Logf("the first persistent publication was confirmed %s after dev said the cluster runs", took.Round(time.Millisecond))
			if took > 5*time.Second {
				t.Fatalf("the first persistent publication took %s after dev said the cluster runs: pushsync waited", took)
			}

		case len(args) > 0 && args[0] == "sub":
			if sub == nil || stored == nil {
				t.Fatal("README: sub --from before the live sub and the persistent pub")
			}
			// "Stop your sub (Ctrl-C)"
			sub.interrupt(t)
			stoppedAt := *printed[len(printed)-1].Index + 1
			sub, printed = nil, nil
			// "publish a few more the same way"
			missedFrom, missed := pub(stored, "a few more the same way")
			// "then start it again where it stopped"
			from, err := strconv.ParseUint(args[indexOf(args, "--from")+1], 10, 64)
			if err != nil || from != stoppedAt || from != missedFrom {
				t.Fatalf("README: sub --from %s; the stopped sub stopped at %d", args[indexOf(args, "--from")+1], stoppedAt)
			}
			sub = startREADMEProc(t, bin, work, args)
			if got := sub.connected(ctx, t, address); got != topic {
				t.Fatalf("sub --from: topic %s, the first sub's %s", got, topic)
			}
			// "At the next update it says recovered and prints every update
			// it missed, in order, before the live one"
			live, payloads := pub(stored, "the next update")
			r := sub.next(ctx, t)
			if r.Type != "recovered" || uintOf(r.From) != from || uintOf(r.To) != live-1 {
				t.Fatalf("sub --from %d printed %s, want recovered %d to %d", from, r.raw, from, live-1)
			}
			expectSub(sub, from, missed)
			expectSub(sub, live, payloads)

		default:
			t.Fatalf("README: %q is not a command of the walkthrough this test knows: teach it", strings.Join(words, " "))
		}
	}
	if sub == nil || stored == nil || address == "" {
		t.Fatal("README: the walkthrough misses a step (keygen, sub, pub, persistent pub)")
	}

	// "Any bee reads the same feed: curl '…'": the latest update and its index.
	url := strings.Replace(expand([]string{w.curl})[0], "http://127.0.0.1:1633", cl.Nodes[0].API, 1)
	if url == w.curl || !strings.HasPrefix(url, cl.Nodes[0].API+"/feeds/") {
		t.Fatalf("README: curl %s is not the broker's GET /feeds", w.curl)
	}
	last := payloadsOf(stored)[len(payloadsOf(stored))-1]
	wantIndex := hex.EncodeToString(binary.BigEndian.AppendUint64(nil, next-1))
	var answer string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			idx := resp.Header.Get("Swarm-Feed-Index")
			if resp.StatusCode == http.StatusOK && idx == wantIndex && string(b) == last {
				break
			}
			answer = fmt.Sprintf("%s, Swarm-Feed-Index %q: %q", resp.Status, idx, b)
		} else {
			answer = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s: %s; want %q at index %s", url, answer, last, wantIndex)
		case <-time.After(200 * time.Millisecond):
		}
	}
	sub.interrupt(t)
}

// clusterField is nodes[i].field of the info file at path, "" if absent.
func clusterField(t *testing.T, path, i, field string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(i)
	if n >= len(info.Nodes) {
		return ""
	}
	s, _ := info.Nodes[n][field].(string)
	return s
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// uintOf reads a JSON number, or a decimal string, as an index.
func uintOf(v any) uint64 {
	switch x := v.(type) {
	case float64:
		return uint64(x)
	case string:
		n, _ := strconv.ParseUint(x, 10, 64)
		return n
	}
	return 1<<64 - 1
}

// runREADMECommand runs bin args… in dir until it exits, bounded by ctx,
// and returns its output; failing is fatal.
func runREADMECommand(ctx context.Context, t *testing.T, bin, dir string, args []string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bee-bps %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// subLine is a line sub --json prints: an update, or a text frame.
type subLine struct {
	Index   *uint64 `json:"index"`
	Payload string  `json:"payload"`
	Owner   string  `json:"owner"`
	Type    string  `json:"type"`
	From    any     `json:"from"`
	To      any     `json:"to"`
	raw     string
}

// readmeProc is a long-running command (sub): its standard output line by
// line, its standard error kept. The test interrupts it, or kills it at
// the end.
type readmeProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *lineWatch
	exited chan error
}

func startREADMEProc(t *testing.T, bin, dir string, args []string) *readmeProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	p := &readmeProc{cmd: cmd, lines: make(chan string, 256), stderr: &lineWatch{want: "waiting for messages", seen: make(chan struct{})}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // more than the test reads: it fails on what it read
			}
		}
	})
	go func() {
		wg.Wait() // the pipe is read to its end before Wait closes it
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		p.exited <- nil
	})
	return p
}

// connected waits until sub says it is connected in feed mode for admin,
// and returns the topic it reports.
func (p *readmeProc) connected(ctx context.Context, t *testing.T, admin string) string {
	t.Helper()
	select {
	case <-p.stderr.seen:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("sub exited: %v\n%s", err, p.stderr)
	case <-ctx.Done():
		t.Fatalf("sub not connected: %v\n%s", ctx.Err(), p.stderr)
	}
	m := regexp.MustCompile(`connected to \S+ through broker \S+; feed mode: topic ([0-9a-f]{64}), admin ([0-9a-f]{40})`).FindStringSubmatch(p.stderr.String())
	if m == nil || m[2] != admin {
		t.Fatalf("sub said %q, want connected in feed mode for %s", p.stderr, admin)
	}
	return m[1]
}

// next is the next line sub prints.
func (p *readmeProc) next(ctx context.Context, t *testing.T) subLine {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("sub ended\nstderr: %s", p.stderr)
		}
		var s subLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("sub printed %q: %v", l, err)
		}
		s.raw = l
		return s
	case <-ctx.Done():
		t.Fatalf("sub printed nothing more: %v\nstderr: %s", ctx.Err(), p.stderr)
	}
	return subLine{}
}

// interrupt is Ctrl-C: sub must exit, cleanly, within ten seconds.
func (p *readmeProc) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatalf("sub after Ctrl-C: %v\n%s", err, p.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("sub still running ten seconds after Ctrl-C\n%s", p.stderr)
	}
}
