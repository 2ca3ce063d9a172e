"""tdev.patch"""
