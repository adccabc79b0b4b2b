"""servecap search: the cheapest deployment that meets the SLOs, and its Pareto frontier."""
