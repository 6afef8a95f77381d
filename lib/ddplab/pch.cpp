// Compiled only to build the precompiled header pch.h that every ddplab target reuses.
