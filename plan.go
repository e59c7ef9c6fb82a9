package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
)

// A plan is what a Limiter counts a client under: the default policies,
// or those WithLimits found for it. It holds the validated set and what
// never changes in its headers, computed once.
type plan struct {
	set      PolicySet
	policyHV string   // RateLimit-Policy value
	limitHV  []string // X-RateLimit-Limit value, per policy of set
}

// newPlan makes the plan of policies for a limiter of scope (see
// limiterScope): its sets are kept apart from every other limiter's,
// whatever their policies and whatever keys the Keyer returns.
func newPlan(scope string, policies []Policy) (*plan, error) {
	set, err := newPolicySet(scope, policies)
	if err != nil {
		return nil, err
	}
	p := &plan{set: set}
	// The header lists the policies in the order they were given.
	hv := make([]string, len(policies))
	for i, pol := range policies {
		hv[i] = fmt.Sprintf("%q;q=%d;w=%d", pol.Name, pol.Limit, ceilSeconds(nominalWindow(&pol)))
	}
	p.policyHV = strings.Join(hv, ", ")
	for i := range set.Len() {
		p.limitHV = append(p.limitHV, strconv.Itoa(set.At(i).Limit))
	}
	return p, nil
}

// limit returns the X-RateLimit-Limit value of the policy named name.
func (p *plan) limit(name string) string {
	ps := p.set.p.policies
	for i := range ps {
		if ps[i].Name == name {
			return p.limitHV[i]
		}
	}
	return p.limitHV[0]
}
