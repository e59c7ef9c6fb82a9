package ratelimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
)

func TestParsePolicies(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, c := range []struct {
		text string
		want []ratelimit.Policy
		// canonical is what String writes, when it is not text.
		canonical string
	}{
		{"300/min", []ratelimit.Policy{{Name: "per-min", Limit: 300, Window: time.Minute}}, ""},
		{"10/s", []ratelimit.Policy{{Name: "per-s", Limit: 10, Window: time.Second}}, ""},
		{"5000/h", []ratelimit.Policy{{Name: "per-h", Limit: 5000, Window: time.Hour}}, ""},
		{"100/10s", []ratelimit.Policy{{Name: "per-10s", Limit: 100, Window: 10 * time.Second}}, ""},
		{"2/500ms", []ratelimit.Policy{{Name: "per-500ms", Limit: 2, Window: 500 * time.Millisecond}}, ""},
		{"7/90min", []ratelimit.Policy{{Name: "per-90min", Limit: 7, Window: 90 * time.Minute}}, ""},
		{"7/120min", []ratelimit.Policy{{Name: "per-2h", Limit: 7, Window: 2 * time.Hour}}, "7/2h"},
		{"100/minute", []ratelimit.Policy{{Name: "per-min", Limit: 100, Window: time.Minute}}, "100/min"},
		{"100/1m", []ratelimit.Policy{{Name: "per-min", Limit: 100, Window: time.Minute}}, "100/min"},
		{"100 / 30 seconds", []ratelimit.Policy{{Name: "per-30s", Limit: 100, Window: 30 * time.Second}}, "100/30s"},
		{"1000000/month", []ratelimit.Policy{{Name: "monthly", Limit: 1_000_000, Algorithm: ratelimit.Monthly}}, ""},
		{"50/week", []ratelimit.Policy{{Name: "weekly", Limit: 50, Algorithm: ratelimit.Weekly}}, ""},
		{"1000/day;tz=Europe/Berlin", []ratelimit.Policy{{Name: "daily", Limit: 1000, Algorithm: ratelimit.Daily, Location: berlin}}, ""},
		{"5/15min;algo=gcra;name=api", []ratelimit.Policy{{Name: "api", Limit: 5, Window: 15 * time.Minute, Algorithm: ratelimit.GCRA}}, "5/15min;algo=gcra;name=api"},
		{"5/15min; name=api ;algo=counter", []ratelimit.Policy{{Name: "api", Limit: 5, Window: 15 * time.Minute, Algorithm: ratelimit.SlidingWindowCounter}}, "5/15min;algo=counter;name=api"},
		{"300/min;algo=log", []ratelimit.Policy{{Name: "per-min", Limit: 300, Window: time.Minute}}, "300/min"},
		{"10/s, 1000000/month", []ratelimit.Policy{
			{Name: "per-s", Limit: 10, Window: time.Second},
			{Name: "monthly", Limit: 1_000_000, Algorithm: ratelimit.Monthly},
		}, ""},
	} {
		t.Run(c.text, func(t *testing.T) {
			got, err := ratelimit.ParsePolicies(c.text)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			var texts []string
			for _, p := range got {
				texts = append(texts, p.String())
			}
			canonical := c.canonical
			if canonical == "" {
				canonical = c.text
			}
			assert.Equal(t, canonical, strings.Join(texts, ", "), "String")
			again, err := ratelimit.ParsePolicies(strings.Join(texts, ", "))
			require.NoError(t, err, "String's text")
			assert.Equal(t, got, again, "ParsePolicies(String())")
		})
	}
}

// Every error is reported, each naming its policy and what is wrong.
func TestParsePoliciesErrors(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"", []string{`policy 1 ""`, "want limit/window"}},
		{"300", []string{"want limit/window"}},
		{"0/min", []string{`limit "0"`}},
		{"-1/min", []string{`limit "-1"`}},
		{"3000000000/min", []string{`limit "3000000000"`}},
		{"abc/min", []string{`limit "abc"`}},
		{"300/", []string{"want a unit"}},
		{"300/10", []string{"want a unit"}},
		{"300/fortnight", []string{`unknown unit "fortnight"`}},
		{"300/0s", []string{"want a count from 1"}},
		{"3/2month", []string{"a calendar month takes no count"}},
		{"1/1000000h", []string{"at most two years"}},
		{"300/min;algo=fast", []string{`algo "fast"`}},
		{"300/month;algo=gcra", []string{"a calendar period counts its own way"}},
		{"300/min;tz=Europe/Berlin", []string{"only calendar periods"}},
		{"300/day;tz=Mars/Olympus", []string{`tz "Mars/Olympus"`}},
		{"300/day;tz=../../etc/passwd", []string{"tz"}},
		// The file system finds these where the embedded database does
		// not, and their sets' IDs differ from Europe/Berlin's: a fleet
		// would count one quota twice.
		{"300/day;tz=Europe//Berlin", []string{`tz "Europe//Berlin"`}},
		{"300/day;tz=Europe/Berlin/", []string{`tz "Europe/Berlin/"`}},
		{"300/min;name=a b", []string{`name "a b"`}},
		{"300/min;color=red", []string{`unknown parameter "color"`}},
		{"300/min;algo=gcra;algo=log", []string{`parameter "algo" given twice`}},
		{"300/min;name=a;name=b", []string{`parameter "name" given twice`}},
		{"300/day;tz=UTC; tz = Europe/Berlin", []string{`parameter "tz" given twice`}},
		{"300/min, 600/min", []string{`policy name "per-min" used twice`}},
		{"0/min, 300/fortnight, 5/s", []string{`policy 1 "0/min"`, `policy 2 "300/fortnight"`}},
		{"0/fortnight;color=red", []string{`limit "0"`, `unknown unit`, `unknown parameter "color"`}},
	} {
		t.Run(c.text, func(t *testing.T) {
			ps, err := ratelimit.ParsePolicies(c.text)
			require.Error(t, err)
			assert.Nil(t, ps, "policies with an error")
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// FuzzParsePolicies: whatever the text, ParsePolicies never panics; what
// it accepts fits one set, and each policy's String reads back as the
// same policy.
func FuzzParsePolicies(f *testing.F) {
	for _, s := range []string{
		"300/min", "10/s, 1000000/month", "5/15min;algo=gcra;name=api", "1000/day;tz=Europe/Berlin",
		"100 / 30 seconds", "3/2month", "0/min, 300/fortnight", "7/120min", "1/1ns", "2147483647/17520h",
		"1/week;tz=America/New_York;name=w", ";;;", "/,/", "1/s;name=", "1/s;tz=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ps, err := ratelimit.ParsePolicies(text)
		if err != nil {
			if ps != nil {
				t.Fatalf("%q: policies %v with error %v", text, ps, err)
			}
			return
		}
		if _, err := ratelimit.NewPolicySet(ps...); err != nil {
			t.Fatalf("%q: parsed %v, not a set: %v", text, ps, err)
		}
		for _, p := range ps {
			again, err := ratelimit.ParsePolicies(p.String())
			if err != nil || len(again) != 1 {
				t.Fatalf("%q: %v's String %q: %v, %v", text, p, p.String(), again, err)
			}
			q := again[0]
			if q.Name != p.Name || q.Limit != p.Limit || q.Window != p.Window || q.Algorithm != p.Algorithm || q.Location.String() != p.Location.String() {
				t.Fatalf("%q: %+v reads back from %q as %+v", text, p, p.String(), q)
			}
		}
	})
}

// Policies kept as text in configuration become policies of a limiter.
func ExampleParsePolicies() {
	ps, err := ratelimit.ParsePolicies("10/s, 1000000/month")
	if err != nil {
		panic(err)
	}
	for _, p := range ps {
		fmt.Printf("%s: %d, %v, %v\n", p.Name, p.Limit, p.Window, p.Algorithm)
	}
	_, err = ratelimit.ParsePolicies("0/min, 300/fortnight")
	fmt.Println(err)
	// Output:
	// per-s: 10, 1s, SlidingLog
	// monthly: 1000000, 0s, Monthly
	// ratelimit: policy 1 "0/min": limit "0": want a whole number from 1 to 2147483647
	// ratelimit: policy 2 "300/fortnight": window "fortnight": unknown unit "fortnight", want ms, s, min, h, day, week or month
}

// A zone is named by the IANA database: "Local" (and "localtime", where
// the zone files have it) is whatever zone the host runs in, so servers
// of a fleet in different zones would count one quota, known by one
// name, over different days and months.
func TestParsePoliciesHostZone(t *testing.T) {
	for _, text := range []string{"1000/month;tz=Local", "1000/day;tz=localtime"} {
		t.Run(text, func(t *testing.T) {
			ps, err := ratelimit.ParsePolicies(text)
			require.Error(t, err, "policies %v", ps)
			assert.Nil(t, ps, "policies with an error")
			assert.Contains(t, err.Error(), "want a zone of the IANA database")
		})
	}
}
