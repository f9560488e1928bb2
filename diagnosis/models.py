"""diagnosis's tables (slowdowns and their ranked causes) are added with the slowdown pass."""
