"""kubernetes-sigs/kueue#11480: the late admission write (stuck preemption, quota oversubscription)."""
