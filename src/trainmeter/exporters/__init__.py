"""Ways a run's numbers leave trainmeter for other tools."""
